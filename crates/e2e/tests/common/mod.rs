//! What the whole-bounty tests of several stacks share.

use chain_testkit::{Testkit, status};
use e2e::{E2eConfig, Scenario, ScenarioResult, Stack, run_bounty};
use verifier_sdk::settle::SettlementEvent;

/// Plays `stack`'s bounty with the good solution, then with the bad one (in turn: both use the
/// keeper's dev account, whose nonce parallel runs would race on), and checks the chain through
/// a connection of the test's own, not the run's: the first settled, the second was rejected
/// (neither settled nor left submitted).
pub async fn settle_then_reject(cfg: &E2eConfig, stack: Stack) -> (ScenarioResult, ScenarioResult) {
    let kit = Testkit::connect().await.unwrap_or_else(|e| panic!("{e}"));

    let settled = run_bounty(cfg, stack, Scenario::Settled)
        .await
        .unwrap_or_else(|e| panic!("{stack:?} settled scenario: {e}"));
    assert!(
        matches!(settled.event, SettlementEvent::Settled(_)),
        "{settled:?}"
    );
    let bounty = chain_testkit::TestBounty::new(settled.bounty, kit.provider().clone());
    assert_eq!(bounty.status().call().await.unwrap(), status::SETTLED);

    let rejected = run_bounty(cfg, stack, Scenario::Rejected)
        .await
        .unwrap_or_else(|e| panic!("{stack:?} rejected scenario: {e}"));
    assert!(
        matches!(rejected.event, SettlementEvent::Rejected(_)),
        "{rejected:?}"
    );
    let bounty = chain_testkit::TestBounty::new(rejected.bounty, kit.provider().clone());
    let after = bounty.status().call().await.unwrap();
    assert_ne!(after, status::SETTLED);
    assert_ne!(after, status::SUBMITTED);
    (settled, rejected)
}
