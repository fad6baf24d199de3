//! Gas and EIP-1559 fee decisions: pure, so every cap is tested without a chain.

/// The operator's caps from the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeeCaps {
    /// Refuse when `eth_estimateGas` is above this.
    pub max_gas: u64,
    /// Never offer more than this per gas (wei).
    pub max_fee_per_gas: u128,
    /// Never tip more than this per gas (wei); defaults to the node's suggestion capped by
    /// `max_fee_per_gas`.
    pub max_priority_fee_per_gas: Option<u128>,
}

impl FeeCaps {
    /// The most to tip per gas: `--max-priority-fee-per-gas`, never above `--max-fee-per-gas`.
    fn priority_cap(self) -> u128 {
        self.max_priority_fee_per_gas
            .unwrap_or(self.max_fee_per_gas)
            .min(self.max_fee_per_gas)
    }
}

/// What the chain says now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeeQuote {
    /// Latest block's base fee (wei).
    pub base_fee_per_gas: u128,
    /// The node's `eth_maxPriorityFeePerGas`.
    pub suggested_priority_fee_per_gas: u128,
}

/// The gas and fee fields of the transaction to sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeePlan {
    /// Gas limit: the estimate plus a 20 % margin, never above the cap.
    pub gas_limit: u64,
    /// `maxFeePerGas`.
    pub max_fee_per_gas: u128,
    /// `maxPriorityFeePerGas`.
    pub max_priority_fee_per_gas: u128,
}

impl FeePlan {
    /// The most the transaction can cost: `gas_limit × max_fee_per_gas`.
    pub fn max_cost_wei(&self) -> u128 {
        u128::from(self.gas_limit).saturating_mul(self.max_fee_per_gas)
    }
}

/// Why the keeper will not pay for this settlement now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FeeRefusal {
    /// The gas estimate is above `--max-gas`.
    #[error("gas estimate {estimate} is above the cap {cap}")]
    GasAboveCap {
        /// `eth_estimateGas`.
        estimate: u64,
        /// `--max-gas`.
        cap: u64,
    },
    /// The base fee alone is above `--max-fee-per-gas`.
    #[error("base fee {base_fee} wei is above the cap {cap} wei")]
    BaseFeeAboveCap {
        /// Latest base fee.
        base_fee: u128,
        /// `--max-fee-per-gas`.
        cap: u128,
    },
}

impl FeeRefusal {
    /// Stable code for reports.
    pub const fn code(&self) -> &'static str {
        match self {
            Self::GasAboveCap { .. } => "gas_above_cap",
            Self::BaseFeeAboveCap { .. } => "fee_above_cap",
        }
    }
}

/// The least raise, in percent of both `maxFeePerGas` and `maxPriorityFeePerGas`, with which
/// a node accepts a transaction replacing a pending one of the same sender and nonce (geth's
/// and op-geth's default `txpool.pricebump`, Hardhat's rule too).
pub const REPLACEMENT_BUMP_PERCENT: u128 = 10;

/// Why a pending transaction is not replaced now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplacementRefusal {
    /// The least acceptable replacement would pay more per gas than `--max-fee-per-gas` (or
    /// tip more than `--max-priority-fee-per-gas`).
    #[error(
        "a replacement must offer at least {needed} wei per gas ({REPLACEMENT_BUMP_PERCENT} % above \
         {offered} wei), above the cap {cap} wei"
    )]
    AboveCap {
        /// The least fee (or tip) a node accepts.
        needed: u128,
        /// What the pending transaction offers.
        offered: u128,
        /// The cap it would exceed.
        cap: u128,
    },
    /// The base fee alone is above `--max-fee-per-gas`: no fee within the cap gets it mined.
    #[error("base fee {base_fee} wei is above the cap {cap} wei")]
    BaseFeeAboveCap {
        /// Latest base fee.
        base_fee: u128,
        /// `--max-fee-per-gas`.
        cap: u128,
    },
}

impl ReplacementRefusal {
    /// Stable code for reports.
    pub const fn code(&self) -> &'static str {
        "replacement_above_cap"
    }
}

/// `value` raised by [`REPLACEMENT_BUMP_PERCENT`], rounded up, and by at least 1 wei.
fn bumped(value: u128) -> u128 {
    let raise = value
        .saturating_mul(REPLACEMENT_BUMP_PERCENT)
        .div_ceil(100)
        .max(1);
    value.saturating_add(raise)
}

/// Fees for a transaction replacing the pending `old` one (same nonce, same call, same gas
/// limit): each fee at least the replacement minimum above the old one, and at least what
/// [`plan_fees`] would offer now, never above the caps.
pub fn plan_replacement(
    caps: FeeCaps,
    quote: FeeQuote,
    old: FeePlan,
) -> Result<FeePlan, ReplacementRefusal> {
    if quote.base_fee_per_gas > caps.max_fee_per_gas {
        return Err(ReplacementRefusal::BaseFeeAboveCap {
            base_fee: quote.base_fee_per_gas,
            cap: caps.max_fee_per_gas,
        });
    }
    let priority_cap = caps.priority_cap();
    let min_tip = bumped(old.max_priority_fee_per_gas);
    if min_tip > priority_cap {
        return Err(ReplacementRefusal::AboveCap {
            needed: min_tip,
            offered: old.max_priority_fee_per_gas,
            cap: priority_cap,
        });
    }
    let min_fee = bumped(old.max_fee_per_gas);
    if min_fee > caps.max_fee_per_gas {
        return Err(ReplacementRefusal::AboveCap {
            needed: min_fee,
            offered: old.max_fee_per_gas,
            cap: caps.max_fee_per_gas,
        });
    }
    let tip = quote
        .suggested_priority_fee_per_gas
        .min(priority_cap)
        .max(min_tip);
    let max_fee = quote
        .base_fee_per_gas
        .saturating_mul(2)
        .saturating_add(tip)
        .min(caps.max_fee_per_gas)
        .max(min_fee);
    Ok(FeePlan {
        gas_limit: old.gas_limit,
        max_fee_per_gas: max_fee,
        max_priority_fee_per_gas: tip.min(max_fee),
    })
}

/// Decides gas limit and fees: refuse above the gas cap or when the base fee alone exceeds
/// the fee cap; `max fee = min(cap, 2 × base + priority)`.
pub fn plan_fees(caps: FeeCaps, quote: FeeQuote, gas_estimate: u64) -> Result<FeePlan, FeeRefusal> {
    if gas_estimate > caps.max_gas {
        return Err(FeeRefusal::GasAboveCap {
            estimate: gas_estimate,
            cap: caps.max_gas,
        });
    }
    if quote.base_fee_per_gas > caps.max_fee_per_gas {
        return Err(FeeRefusal::BaseFeeAboveCap {
            base_fee: quote.base_fee_per_gas,
            cap: caps.max_fee_per_gas,
        });
    }
    let priority_cap = caps.priority_cap();
    let priority = quote.suggested_priority_fee_per_gas.min(priority_cap);
    let max_fee = quote
        .base_fee_per_gas
        .saturating_mul(2)
        .saturating_add(priority)
        .min(caps.max_fee_per_gas);
    // A 20 % margin over the estimate absorbs state drift between estimate and inclusion.
    let padded = gas_estimate.saturating_add(gas_estimate / 5);
    Ok(FeePlan {
        gas_limit: padded.min(caps.max_gas),
        max_fee_per_gas: max_fee,
        max_priority_fee_per_gas: priority.min(max_fee),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps() -> FeeCaps {
        FeeCaps {
            max_gas: 500_000,
            max_fee_per_gas: 10_000_000_000,
            max_priority_fee_per_gas: None,
        }
    }

    fn quote(base: u128, tip: u128) -> FeeQuote {
        FeeQuote {
            base_fee_per_gas: base,
            suggested_priority_fee_per_gas: tip,
        }
    }

    #[test]
    fn max_fee_is_twice_base_plus_tip_under_the_cap() {
        let plan = plan_fees(caps(), quote(1_000_000_000, 100), 100_000).unwrap();
        assert_eq!(plan.max_fee_per_gas, 2_000_000_100);
        assert_eq!(plan.max_priority_fee_per_gas, 100);
        assert_eq!(plan.gas_limit, 120_000);
        assert_eq!(plan.max_cost_wei(), 120_000 * 2_000_000_100);
    }

    #[test]
    fn max_fee_is_capped() {
        let plan = plan_fees(caps(), quote(6_000_000_000, 1_000_000_000), 100_000).unwrap();
        assert_eq!(plan.max_fee_per_gas, 10_000_000_000);
        assert_eq!(plan.max_priority_fee_per_gas, 1_000_000_000);
    }

    #[test]
    fn base_fee_equal_to_cap_is_allowed_one_above_is_refused() {
        let cap = caps().max_fee_per_gas;
        let plan = plan_fees(caps(), quote(cap, 5), 21_000).unwrap();
        assert_eq!(plan.max_fee_per_gas, cap);
        assert_eq!(plan.max_priority_fee_per_gas, 5);
        assert_eq!(
            plan_fees(caps(), quote(cap + 1, 0), 21_000),
            Err(FeeRefusal::BaseFeeAboveCap {
                base_fee: cap + 1,
                cap
            })
        );
    }

    #[test]
    fn gas_estimate_at_cap_is_allowed_and_limit_never_exceeds_it() {
        let plan = plan_fees(caps(), quote(1, 1), 500_000).unwrap();
        assert_eq!(plan.gas_limit, 500_000);
        let plan = plan_fees(caps(), quote(1, 1), 450_000).unwrap();
        assert_eq!(plan.gas_limit, 500_000);
        assert_eq!(
            plan_fees(caps(), quote(1, 1), 500_001),
            Err(FeeRefusal::GasAboveCap {
                estimate: 500_001,
                cap: 500_000
            })
        );
    }

    fn old(fee: u128, tip: u128) -> FeePlan {
        FeePlan {
            gas_limit: 120_000,
            max_fee_per_gas: fee,
            max_priority_fee_per_gas: tip,
        }
    }

    #[test]
    fn replacement_pays_the_current_base_fee_and_at_least_the_minimum_bump() {
        // The base fee rose: the replacement follows it.
        let plan =
            plan_replacement(caps(), quote(4_000_000_000, 100), old(2_000_000_000, 100)).unwrap();
        assert_eq!(plan.gas_limit, 120_000);
        assert_eq!(plan.max_fee_per_gas, 8_000_000_110);
        assert_eq!(plan.max_priority_fee_per_gas, 110);
        // The base fee did not move: only the minimum bump, rounded up.
        let plan = plan_replacement(caps(), quote(1, 1), old(1_000_000_001, 7)).unwrap();
        assert_eq!(plan.max_fee_per_gas, 1_100_000_002);
        assert_eq!(plan.max_priority_fee_per_gas, 8);
        // Zero fees still go up, or the node calls the replacement underpriced.
        let plan = plan_replacement(caps(), quote(0, 0), old(0, 0)).unwrap();
        assert_eq!(
            (plan.max_fee_per_gas, plan.max_priority_fee_per_gas),
            (1, 1)
        );
    }

    #[test]
    fn replacement_is_refused_when_the_minimum_bump_passes_a_cap() {
        let cap = caps().max_fee_per_gas;
        let at_cap = plan_replacement(caps(), quote(1, 1), old(cap / 11 * 10, 1)).unwrap();
        assert!(at_cap.max_fee_per_gas <= cap);
        let refused = plan_replacement(caps(), quote(1, 1), old(cap / 10 * 10 - 9, 1));
        assert!(
            matches!(refused, Err(ReplacementRefusal::AboveCap { .. })),
            "{refused:?}"
        );
        assert_eq!(refused.unwrap_err().code(), "replacement_above_cap");
        let mut c = caps();
        c.max_priority_fee_per_gas = Some(10);
        assert!(matches!(
            plan_replacement(c, quote(1, 1), old(1_000, 10)),
            Err(ReplacementRefusal::AboveCap {
                needed: 11,
                cap: 10,
                ..
            })
        ));
        assert!(matches!(
            plan_replacement(caps(), quote(cap + 1, 1), old(1, 1)),
            Err(ReplacementRefusal::BaseFeeAboveCap { .. })
        ));
        // A hostile quote cannot push it past the cap or overflow.
        let plan = plan_replacement(caps(), quote(cap, u128::MAX), old(1, 1)).unwrap();
        assert_eq!(plan.max_fee_per_gas, cap);
        assert!(plan.max_priority_fee_per_gas <= plan.max_fee_per_gas);
    }

    #[test]
    fn priority_cap_and_hostile_quotes() {
        let mut c = caps();
        c.max_priority_fee_per_gas = Some(7);
        let plan = plan_fees(c, quote(10, 1_000), 21_000).unwrap();
        assert_eq!(plan.max_priority_fee_per_gas, 7);
        assert_eq!(plan.max_fee_per_gas, 27);
        // A node suggesting an absurd tip cannot push the fee past the cap or overflow.
        let plan = plan_fees(caps(), quote(u128::from(u64::MAX), u128::MAX), 21_000);
        assert!(matches!(plan, Err(FeeRefusal::BaseFeeAboveCap { .. })));
        let plan = plan_fees(caps(), quote(0, u128::MAX), 500_000).unwrap();
        assert_eq!(plan.max_fee_per_gas, caps().max_fee_per_gas);
        assert!(plan.max_priority_fee_per_gas <= plan.max_fee_per_gas);
        assert_eq!(
            FeePlan {
                gas_limit: u64::MAX,
                max_fee_per_gas: u128::MAX,
                max_priority_fee_per_gas: 0
            }
            .max_cost_wei(),
            u128::MAX
        );
    }
}
