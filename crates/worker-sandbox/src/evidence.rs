//! The evidence record (DESIGN §5): what one run observed. The record and its parts are the
//! sdk's ([`verifier_sdk::evidence`]), so the worker writes exactly the type the signer,
//! the keeper and `worker explain` read; this module only names them for the sandbox.

pub use verifier_sdk::evidence::{
    ContainerFacts, DOCKER_EXECUTOR, EVIDENCE_SCHEMA_VERSION, EngineFacts, EvidenceRecord,
    ExitFacts, ImageFacts, IsolationEvidence, RequestFacts, ResourceFacts, Timestamps,
};
