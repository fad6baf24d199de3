#!/usr/bin/env python3
"""Validates an in-toto Statement v1 with the test-result predicate using the in-toto
project's own Python bindings (the `in-toto-attestation` package from PyPI), independently of
the worker's Rust types. Prints a JSON summary of what it read on success; exits 1 with the
reason on stderr otherwise.

Usage: check-intoto.py STATEMENT.json
"""
import json
import sys

import google.protobuf.json_format as pb_json
from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement

TEST_RESULT = "https://in-toto.io/attestation/test-result/v0.1"
RESULTS = {"PASSED", "WARNED", "FAILED"}


def main(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    # Strict parse: a field the Statement schema does not define is an error.
    pb = pb_json.ParseDict(doc, statement_pb2.Statement(), ignore_unknown_fields=False)
    Statement.copy_from_pb(pb).validate()
    if pb.predicate_type != TEST_RESULT:
        raise ValueError(f"predicateType is {pb.predicate_type!r}, not {TEST_RESULT!r}")
    predicate = pb_json.ParseDict(
        pb_json.MessageToDict(pb.predicate),
        test_result_pb2.TestResult(),
        ignore_unknown_fields=False,
    )
    if predicate.result not in RESULTS:
        raise ValueError(f"result {predicate.result!r} is not one of {sorted(RESULTS)}")
    for i, rd in enumerate(predicate.configuration):
        ResourceDescriptor.copy_from_pb(rd).validate()
    for s in pb.subject:
        for alg, value in s.digest.items():
            if alg == "sha256" and (len(value) != 64 or value.strip("0123456789abcdef")):
                raise ValueError(f"subject {s.name!r}: sha256 is not 64 lowercase hex")
    print(
        json.dumps(
            {
                "result": predicate.result,
                "subjects": {s.name: dict(s.digest) for s in pb.subject},
                "configuration": {
                    c.name: {"uri": c.uri, "digest": dict(c.digest)}
                    for c in predicate.configuration
                },
                "url": predicate.url,
                "passedTests": list(predicate.passed_tests),
                "failedTests": list(predicate.failed_tests),
                "responseHash": next(
                    (
                        pb_json.MessageToDict(c.annotations).get("responseHash")
                        for c in predicate.configuration
                        if c.name == "evidence"
                    ),
                    None,
                ),
            },
            sort_keys=True,
        )
    )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        main(sys.argv[1])
    except Exception as e:  # any refusal of the bindings is a failed validation
        print(f"check-intoto: invalid statement: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
