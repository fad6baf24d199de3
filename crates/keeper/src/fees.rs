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
    let priority_cap = caps
        .max_priority_fee_per_gas
        .unwrap_or(caps.max_fee_per_gas)
        .min(caps.max_fee_per_gas);
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
