#!/usr/bin/env node
// Compiles contracts/*.sol offline with solc-js (pinned 0.8.28) and writes one artifact per
// contract to contracts/out/<Name>.json ({contractName, compiler, abi, bytecode}).
//
//   node tools/chain/compile.js          write the artifacts
//   node tools/chain/compile.js --check  exit 1 when a committed artifact differs from a fresh
//                                        compile (CI runs this so Rust tests never embed stale
//                                        bytecode)
"use strict";

const fs = require("fs");
const path = require("path");
const solc = require("solc");

const EXPECTED_COMPILER = "0.8.28";
const repo = path.resolve(__dirname, "..", "..");
const contractsDir = path.join(repo, "contracts");
const outDir = path.join(contractsDir, "out");
// Artifacts Rust tests embed; each names its source file.
const CONTRACTS = [
  { file: "TestBounty.sol", name: "TestBounty" },
  { file: "TestVerifierWallet.sol", name: "TestVerifierWallet" },
];

function fail(message) {
  console.error(`compile: ${message}`);
  process.exit(1);
}

function compile() {
  const version = solc.version();
  if (!version.startsWith(`${EXPECTED_COMPILER}+`)) {
    fail(`solc-js is ${version}, expected ${EXPECTED_COMPILER}; run npm ci in tools/chain`);
  }
  const sources = {};
  for (const { file } of CONTRACTS) {
    sources[file] = { content: fs.readFileSync(path.join(contractsDir, file), "utf8") };
  }
  const input = {
    language: "Solidity",
    sources,
    settings: {
      optimizer: { enabled: true, runs: 200 },
      // Pinned so the bytecode does not change with the compiler default; Hardhat's default
      // hardfork is newer and runs cancun bytecode unchanged.
      evmVersion: "cancun",
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors || []).filter((e) => e.severity === "error");
  for (const e of output.errors || []) {
    console.error(e.formattedMessage);
  }
  if (errors.length > 0) {
    fail(`${errors.length} compile error(s)`);
  }
  const artifacts = {};
  for (const { file, name } of CONTRACTS) {
    const c = output.contracts?.[file]?.[name];
    if (!c) {
      fail(`no output for ${file}:${name}`);
    }
    const artifact = {
      contractName: name,
      compiler: `solc-${version}`,
      abi: c.abi,
      bytecode: `0x${c.evm.bytecode.object}`,
    };
    artifacts[`${name}.json`] = `${JSON.stringify(artifact, null, 2)}\n`;
  }
  return artifacts;
}

function main() {
  const check = process.argv.includes("--check");
  const artifacts = compile();
  let stale = 0;
  for (const [fileName, text] of Object.entries(artifacts)) {
    const target = path.join(outDir, fileName);
    if (check) {
      const committed = fs.existsSync(target) ? fs.readFileSync(target, "utf8") : null;
      if (committed !== text) {
        console.error(`compile: contracts/out/${fileName} is stale; run node tools/chain/compile.js`);
        stale += 1;
      }
    } else {
      fs.mkdirSync(outDir, { recursive: true });
      fs.writeFileSync(target, text);
      console.log(`compile: wrote contracts/out/${fileName}`);
    }
  }
  if (stale > 0) {
    process.exit(1);
  }
  if (check) {
    console.log("compile: artifacts are up to date");
  }
}

main();
