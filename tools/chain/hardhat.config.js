// Local test chain for the bounty pipeline. Chain id 8453 (Base mainnet) so signer and keeper
// exercise exactly the chain id they check in production; the mnemonic is Hardhat's public
// default so the funded accounts are the well-known, publicly documented test accounts.
// Nothing here is ever a real key.
module.exports = {
  networks: {
    hardhat: {
      chainId: 8453,
      accounts: {
        mnemonic: "test test test test test test test test test test test junk",
        count: 10,
        accountsBalance: "10000000000000000000000",
      },
      // Mine every transaction immediately so tests see receipts without waiting.
      mining: { auto: true },
    },
  },
  // Hardhat itself compiles nothing here: contracts are compiled offline by compile.js with
  // solc-js. Point sources at an empty folder so no task ever tries to download a compiler.
  paths: {
    sources: "./no-sources",
  },
};
