"""Prints one step of a workflow as the runner would run it: its `env` with each `${{ … }}`
evaluated against a context, then its `run` script, so a test runs the step exactly as the
workflow file writes it (not a copy of it that could drift).

    python3 workflow_step.py <workflow.yml> <job id> <step name> <context.json> <env-out> <run-out>

<env-out> gets one NAME=VALUE per line (values hold no newline); <run-out> the step's `run`.
Only the expressions the workflows use are understood: a dotted context path (vars.X,
github.sha, needs.plan.outputs.release, …) or a quoted string literal, joined by `||` (the
first non-empty wins), and `a == 'b' && c || d`; anything else is refused, so a step whose
expression this cannot read fails the test instead of running with a guess.
"""
import json
import re
import sys

import yaml

EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def lookup(path, context):
    value = context
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part, "")
    return "" if value is None else value


def atom(text, context):
    text = text.strip()
    if re.fullmatch(r"'[^']*'", text):
        return text[1:-1]
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*", text):
        return lookup(text, context)
    raise SystemExit("workflow_step.py: cannot evaluate %r" % text)


def evaluate(expr, context):
    for alternative in expr.split("||"):
        value = alternative
        if "&&" in alternative:
            condition, value = alternative.split("&&", 1)
            left, _, right = condition.partition("==")
            if not right or atom(left, context) != atom(right, context):
                continue
        value = atom(value, context)
        if value not in ("", None, False):
            return value
    return ""


def main():
    workflow, job, name, context_path, env_out, run_out = sys.argv[1:7]
    with open(workflow) as f:
        document = yaml.safe_load(f)
    with open(context_path) as f:
        context = json.load(f)
    steps = [s for s in document["jobs"][job]["steps"] if s.get("name") == name]
    if len(steps) != 1:
        raise SystemExit("workflow_step.py: %d steps named %r in job %s" % (len(steps), name, job))
    step = steps[0]
    with open(env_out, "w") as f:
        for key, raw in (step.get("env") or {}).items():
            value = EXPR.sub(lambda m: str(evaluate(m.group(1), context)), str(raw))
            if "\n" in value:
                raise SystemExit("workflow_step.py: %s holds a newline" % key)
            f.write("%s=%s\n" % (key, value))
    with open(run_out, "w") as f:
        f.write(step["run"])


main()
