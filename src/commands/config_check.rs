//! `owl config check`: the config validated and printed resolved, as a config.yaml owl reads back to the same config (credentials hidden).

use anyhow::Result;
use serde_yaml::Value;

use super::Ctx;
use crate::config::Config;

pub(super) fn run(ctx: &Ctx) -> Result<u8> {
    outln!("# owl config: valid, read from {}", ctx.config.source);
    crate::output::write_out(format_args!("{}", resolved(&ctx.config)?));
    Ok(0)
}

/// The keys that take `null` as a value of their own (no budget at all), not as "unset".
const NULL_MEANS_NONE: [&str; 2] = ["maxBudgetUsd", "maxJobBudgetUsd"];

/// The config as config.yaml spells it, each value the one in force: a key left out
/// where nothing is set (not `null`), a default the code applies written as its value.
fn resolved(config: &Config) -> Result<String> {
    let mut value = serde_yaml::to_value(config)?;
    if let Some(accounts) = value.get_mut("accounts").and_then(Value::as_mapping_mut) {
        for (name, account) in accounts.iter_mut() {
            let limits = name
                .as_str()
                .and_then(|n| config.accounts.get(n))
                .and_then(|a| a.limits);
            if let (Some(limits), Some(shown)) = (limits, account.get_mut("limits")) {
                in_force(&limits, shown);
            }
        }
    }
    drop_unset(&mut value);
    Ok(serde_yaml::to_string(&value)?)
}

/// The night ceiling and the least headroom as the code applies them when unset.
fn in_force(limits: &crate::config::Limits, shown: &mut Value) {
    let night = crate::morning::night_max(Some(limits));
    let headroom = crate::schedule::min_headroom(Some(limits));
    shown["nightMax"] = Value::from(night);
    shown["minHeadroom"] = Value::from(headroom);
}

/// Removes every key whose value is `null` (config.yaml leaves an unset key out), but for
/// those where `null` is a value.
fn drop_unset(value: &mut Value) {
    match value {
        Value::Mapping(map) => {
            map.retain(|key, v| {
                !v.is_null() || key.as_str().is_some_and(|k| NULL_MEANS_NONE.contains(&k))
            });
            map.values_mut().for_each(drop_unset);
        }
        Value::Sequence(items) => items.iter_mut().for_each(drop_unset),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `config check` prints of `text`, read back as config.yaml, prints the same.
    fn round_trip(text: &str) -> String {
        let config = crate::config::parse(text, "test").expect("the config reads");
        let shown = resolved(&config).unwrap();
        let again = crate::config::parse(&shown, "config check's output")
            .unwrap_or_else(|e| panic!("config check printed what owl refuses: {e}\n{shown}"));
        assert_eq!(resolved(&again).unwrap(), shown);
        shown
    }

    #[test]
    fn what_config_check_prints_reads_back_as_the_same_config() {
        let shown = round_trip(
            "stateDir: /tmp/owl\nschedule:\n  morning: '07:00'\n  dayEnds: '23:30'\n\
             defaults:\n  maxBudgetUsd: null\nsandbox:\n  allowHosts: [crates.io]\n\
             accounts:\n  work:\n    limits: {fiveHourMax: 80}\n",
        );
        assert!(
            shown.contains("morning: 07:00") && shown.contains("dayEnds: 23:30"),
            "{shown}"
        );
        assert!(shown.contains("allowHosts:\n  - crates.io"), "{shown}");
        assert!(!shown.contains("window:"), "{shown}");
        assert!(shown.contains("maxBudgetUsd: null"), "{shown}");
        // The defaults in force, not `null`.
        assert!(
            shown.contains("nightMax: 85.0") && shown.contains("minHeadroom: 2.0"),
            "{shown}"
        );
        assert!(!shown.contains("owlFiveHourMax"), "{shown}");
        round_trip("stateDir: /tmp/owl\nschedule:\n  window: '23:00-07:00'\naccounts:\n  a: {}\n");
        round_trip(crate::config::EMBEDDED_DEFAULTS);
    }
}
