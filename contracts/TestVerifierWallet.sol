// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @title TestVerifierWallet
/// @notice A minimal ERC-1271 contract verifier for tests: it approves a digest when the
/// signature is a 65-byte low-s signature by its owner key, so the bounty's contract-verifier
/// path can be exercised against a real contract.
contract TestVerifierWallet {
    bytes4 private constant ERC1271_MAGIC = 0x1626ba7e;
    uint256 private constant SECP256K1_HALF_N =
        0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    address public immutable signer;

    constructor(address signer_) {
        signer = signer_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        if (signature.length != 65) {
            return 0xffffffff;
        }
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        if (uint256(s) > SECP256K1_HALF_N || (v != 27 && v != 28)) {
            return 0xffffffff;
        }
        address recovered = ecrecover(hash, v, r, s);
        return recovered != address(0) && recovered == signer ? ERC1271_MAGIC : bytes4(0xffffffff);
    }
}
