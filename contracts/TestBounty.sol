// SPDX-License-Identifier: Apache-2.0
pragma solidity 0.8.28;

/// @dev ERC-1271: a contract verifier approves a digest by returning this selector.
interface IERC1271 {
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4);
}

/// @title TestBounty
/// @notice A test stand-in for one bounty contract (one contract per bounty) that implements the
/// settlement interface of PROTOCOL.md section 6 exactly: the same views, selectors, EIP-712
/// digest, ordered settlement checks and events. It is NOT a production bounty: claiming and
/// submitting are replaced by owner-only setup and setters so tests can put the bounty in any
/// state and simulate on-chain changes between signing and relaying.
contract TestBounty {
    // Status values of PROTOCOL.md section 6.
    uint8 public constant STATUS_OPEN = 0;
    uint8 public constant STATUS_CLAIMABLE = 1;
    uint8 public constant STATUS_CLAIMED = 2;
    uint8 public constant STATUS_SUBMITTED = 3;
    uint8 public constant STATUS_SETTLED = 4;
    uint8 public constant STATUS_CANCELLED = 5;

    // Verification modes: 0 module, 1 signed quorum, 2 AI quorum.
    uint8 public constant MODE_MODULE = 0;
    uint8 public constant MODE_SIGNED_QUORUM = 1;
    uint8 public constant MODE_AI_QUORUM = 2;

    bytes32 public constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 public constant ATTESTATION_TYPEHASH = keccak256(
        "VerificationAttestation(address bounty,bytes32 bountyId,uint64 round,address verifier,bytes32 submissionHash,bytes32 evidenceHash,bytes32 policyHash,bool passed,bytes32 responseHash,uint256 deadline)"
    );
    bytes32 private constant NAME_HASH = keccak256("Agent Bounties");
    bytes32 private constant VERSION_HASH = keccak256("1");
    bytes4 private constant ERC1271_MAGIC = 0x1626ba7e;
    // Half the secp256k1 group order: signatures with a larger s are malleable twins.
    uint256 private constant SECP256K1_HALF_N =
        0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    struct Attestation {
        address verifier;
        bool passed;
        bytes32 responseHash;
        uint256 deadline;
        bytes signature;
    }

    /// @notice Everything a test chooses about a bounty in the Submitted state.
    struct Config {
        bytes32 bountyId;
        uint64 round;
        address solver;
        bytes32 submissionHash;
        bytes32 evidenceHash;
        bytes32 policyHash;
        bytes32 termsHash;
        bytes32 acceptanceCriteriaHash;
        bytes32 benchmarkHash;
        bytes32 evidenceSchemaHash;
        uint64 verificationExpiresAt;
        uint8 verificationMode;
        uint8 threshold;
        address[] verifiers;
    }

    event BountySettled(
        bytes32 indexed bountyId,
        uint64 indexed round,
        address indexed solver,
        uint256 solverReward,
        uint256 claimBondReturned,
        uint256 timeoutBondBonus,
        uint256 verifierReward,
        bytes32 submissionHash,
        bytes32 evidenceHash,
        bytes32 policyHash,
        bytes32 verificationHash
    );
    event SubmissionRejected(
        bytes32 indexed bountyId,
        uint64 indexed round,
        address indexed solver,
        uint256 verifierReward,
        uint256 claimBondForfeited,
        bytes32 verificationHash
    );
    event SubmissionAdded(
        bytes32 indexed bountyId,
        uint64 indexed round,
        address indexed solver,
        bytes32 submissionHash,
        bytes32 evidenceHash,
        uint64 verificationExpiresAt
    );

    address public immutable owner;

    uint8 public status;
    bytes32 public bountyId;
    uint64 public round;
    address public solver;
    bytes32 public submissionHash;
    bytes32 public evidenceHash;
    bytes32 public policyHash;
    bytes32 public termsHash;
    bytes32 public acceptanceCriteriaHash;
    bytes32 public benchmarkHash;
    bytes32 public evidenceSchemaHash;
    uint64 public verificationExpiresAt;
    uint8 public verificationMode;
    uint8 public threshold;
    bytes32 public verifierSetHash;
    /// @notice Escrowed reward paid to the solver on a passing settlement.
    uint256 public solverReward;

    address[] private verifierList;
    mapping(address => bool) public isVerifier;

    modifier onlyOwner() {
        require(msg.sender == owner, "test bounty: caller is not the owner");
        _;
    }

    /// @notice Deploys the bounty directly in the Submitted state; msg.value is the reward.
    constructor(Config memory config) payable {
        owner = msg.sender;
        _setup(config);
    }

    // ------------------------------------------------------------------ views

    function verifiers() external view returns (address[] memory) {
        return verifierList;
    }

    function domainSeparator() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
    }

    function attestationDigest(address verifier, bool passed, bytes32 responseHash, uint256 deadline)
        public
        view
        returns (bytes32)
    {
        bytes32 structHash = keccak256(
            abi.encode(
                ATTESTATION_TYPEHASH,
                address(this),
                bountyId,
                round,
                verifier,
                submissionHash,
                evidenceHash,
                policyHash,
                passed,
                responseHash,
                deadline
            )
        );
        return keccak256(abi.encodePacked(hex"1901", domainSeparator(), structHash));
    }

    // ------------------------------------------------------------- settlement

    /// @notice Permissionless settlement with exactly `threshold` attestations, checked in the
    /// order PROTOCOL.md section 6 lists. Each check runs over all attestations before the next
    /// check starts, so the revert reason for a given input follows that order.
    function settleWithAttestations(Attestation[] calldata attestations) external {
        require(status == STATUS_SUBMITTED, "bounty: not submitted");
        require(
            verificationMode == MODE_SIGNED_QUORUM || verificationMode == MODE_AI_QUORUM,
            "bounty: not a quorum mode"
        );
        require(block.timestamp <= verificationExpiresAt, "bounty: verification expired");
        require(attestations.length == threshold, "bounty: wrong attestation count");
        // threshold is never 0 (setup and setters refuse it), so attestations[0] exists.
        bool passed = attestations[0].passed;
        for (uint256 i = 1; i < attestations.length; i++) {
            require(attestations[i].passed == passed, "bounty: mixed verdicts");
        }
        for (uint256 i = 0; i < attestations.length; i++) {
            require(isVerifier[attestations[i].verifier], "bounty: not a verifier");
        }
        for (uint256 i = 0; i < attestations.length; i++) {
            require(block.timestamp <= attestations[i].deadline, "bounty: attestation deadline passed");
        }
        for (uint256 i = 0; i < attestations.length; i++) {
            for (uint256 j = 0; j < i; j++) {
                require(attestations[i].verifier != attestations[j].verifier, "bounty: duplicate verifier");
            }
        }
        for (uint256 i = 0; i < attestations.length; i++) {
            Attestation calldata a = attestations[i];
            bytes32 digest = attestationDigest(a.verifier, a.passed, a.responseHash, a.deadline);
            _requireValidSignature(a.verifier, digest, a.signature);
        }

        bytes32 verificationHash = keccak256(abi.encode(attestations));
        if (passed) {
            _settle(verificationHash);
        } else {
            _reject(verificationHash);
        }
    }

    function _settle(bytes32 verificationHash) private {
        uint256 reward = solverReward;
        // State leaves Submitted before any value moves, so a re-entrant call fails check 1.
        status = STATUS_SETTLED;
        solverReward = 0;
        emit BountySettled(
            bountyId, round, solver, reward, 0, 0, 0, submissionHash, evidenceHash, policyHash, verificationHash
        );
        if (reward > 0) {
            (bool ok,) = solver.call{value: reward}("");
            require(ok, "bounty: reward transfer failed");
        }
    }

    function _reject(bytes32 verificationHash) private {
        // A rejected submission reopens the bounty for claims; the reward stays escrowed.
        status = STATUS_CLAIMABLE;
        emit SubmissionRejected(bountyId, round, solver, 0, 0, verificationHash);
    }

    function _requireValidSignature(address verifier, bytes32 digest, bytes calldata signature) private view {
        if (verifier.code.length > 0) {
            (bool ok, bytes memory ret) =
                verifier.staticcall(abi.encodeWithSelector(IERC1271.isValidSignature.selector, digest, signature));
            require(ok && ret.length == 32 && abi.decode(ret, (bytes4)) == ERC1271_MAGIC, "bounty: invalid erc1271 signature");
            return;
        }
        require(signature.length == 65, "bounty: signature length");
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v = uint8(signature[64]);
        require(uint256(s) <= SECP256K1_HALF_N, "bounty: signature s not low");
        require(v == 27 || v == 28, "bounty: signature v invalid");
        address recovered = ecrecover(digest, v, r, s);
        require(recovered != address(0) && recovered == verifier, "bounty: invalid signature");
    }

    // ------------------------------------------------------ test-only control

    /// @notice Re-initializes every field and puts the bounty in Submitted (a new round, say);
    /// msg.value adds to the escrowed reward.
    function setup(Config calldata config) external payable onlyOwner {
        _setup(config);
    }

    function setStatus(uint8 newStatus) external onlyOwner {
        require(newStatus <= STATUS_CANCELLED, "test bounty: unknown status");
        status = newStatus;
    }

    /// @notice Replaces the verifier set and threshold; the set hash follows.
    function setVerifiers(address[] calldata newVerifiers, uint8 newThreshold) external onlyOwner {
        _setVerifiers(newVerifiers);
        _setThreshold(newThreshold);
    }

    /// @notice Appends verifiers to the set (the set hash follows), so tests can build lists
    /// longer than one transaction's gas cap allows.
    function addVerifiers(address[] calldata more) external onlyOwner {
        for (uint256 i = 0; i < more.length; i++) {
            _addVerifier(more[i]);
        }
        verifierSetHash = keccak256(abi.encode(verifierList));
    }

    function setThreshold(uint8 newThreshold) external onlyOwner {
        _setThreshold(newThreshold);
    }

    /// @notice Overwrites the stored verifier set hash alone, to simulate a contract whose hash
    /// disagrees with its list.
    function setVerifierSetHash(bytes32 newHash) external onlyOwner {
        verifierSetHash = newHash;
    }

    function setHashes(bytes32 newSubmission, bytes32 newEvidence, bytes32 newPolicy, bytes32 newTerms)
        external
        onlyOwner
    {
        submissionHash = newSubmission;
        evidenceHash = newEvidence;
        policyHash = newPolicy;
        termsHash = newTerms;
    }

    /// @notice Overwrites the four terms hashes other than the policy's, to simulate a bounty
    /// whose funded terms differ from a job's.
    function setTermsHashes(bytes32 newTerms, bytes32 newCriteria, bytes32 newBenchmark, bytes32 newSchema)
        external
        onlyOwner
    {
        termsHash = newTerms;
        acceptanceCriteriaHash = newCriteria;
        benchmarkHash = newBenchmark;
        evidenceSchemaHash = newSchema;
    }

    function setVerificationExpiresAt(uint64 newExpiry) external onlyOwner {
        verificationExpiresAt = newExpiry;
    }

    function setVerificationMode(uint8 newMode) external onlyOwner {
        verificationMode = newMode;
    }

    function setRound(uint64 newRound) external onlyOwner {
        round = newRound;
    }

    function setBountyId(bytes32 newBountyId) external onlyOwner {
        bountyId = newBountyId;
    }

    function setSolver(address newSolver) external onlyOwner {
        solver = newSolver;
    }

    function _setup(Config memory config) private {
        bountyId = config.bountyId;
        round = config.round;
        solver = config.solver;
        submissionHash = config.submissionHash;
        evidenceHash = config.evidenceHash;
        policyHash = config.policyHash;
        termsHash = config.termsHash;
        acceptanceCriteriaHash = config.acceptanceCriteriaHash;
        benchmarkHash = config.benchmarkHash;
        evidenceSchemaHash = config.evidenceSchemaHash;
        verificationExpiresAt = config.verificationExpiresAt;
        verificationMode = config.verificationMode;
        _setVerifiers(config.verifiers);
        _setThreshold(config.threshold);
        solverReward += msg.value;
        status = STATUS_SUBMITTED;
        emit SubmissionAdded(
            config.bountyId,
            config.round,
            config.solver,
            config.submissionHash,
            config.evidenceHash,
            config.verificationExpiresAt
        );
    }

    function _setVerifiers(address[] memory newVerifiers) private {
        for (uint256 i = 0; i < verifierList.length; i++) {
            isVerifier[verifierList[i]] = false;
        }
        delete verifierList;
        for (uint256 i = 0; i < newVerifiers.length; i++) {
            _addVerifier(newVerifiers[i]);
        }
        verifierSetHash = keccak256(abi.encode(newVerifiers));
    }

    function _addVerifier(address verifier) private {
        require(verifier != address(0), "test bounty: zero verifier");
        require(!isVerifier[verifier], "test bounty: duplicate verifier");
        isVerifier[verifier] = true;
        verifierList.push(verifier);
    }

    function _setThreshold(uint8 newThreshold) private {
        require(newThreshold > 0, "test bounty: zero threshold");
        threshold = newThreshold;
    }
}
