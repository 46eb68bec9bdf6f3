//! The config judged by the Drivers its Accounts run: above both the file format and the Drivers, so that neither knows the other.

use crate::config::Config;

/// Refuses a config that asks a Driver for what it cannot do: above both the file format
/// and the Drivers, so that neither knows the other. A Driver without usage reporting
/// cannot be scheduled under a Ceiling at all, only reactively against rate-limit errors
/// (ADR-0020): `limits` on it would be a promise nobody keeps.
pub(super) fn check_capabilities(config: &Config) -> Result<(), crate::error::Error> {
    check_capabilities_with(config, crate::driver::capabilities)?;
    // Each Driver an Account runs judges the settings it is handed; one no Account runs
    // judges nothing (Claude Code's permission modes do not bind a Codex-only night).
    let kinds: std::collections::BTreeSet<_> = config.accounts.values().map(|a| a.driver).collect();
    for kind in kinds {
        if let Err(why) = crate::driver::for_kind(kind).check_defaults(&config.defaults) {
            return Err(config.error_at(config.defaults.permission_mode_line, &why.to_string()));
        }
    }
    for (name, account) in &config.accounts {
        let driver = crate::driver::for_kind(account.driver);
        if account.learned_reserve.is_some()
            && !crate::driver::offers_probe(driver.as_ref(), account)
        {
            return Err(config.error_at(
                account.learned_reserve_line,
                &format!(
                    "accounts.{name}.learnedReserve needs your day sampled at no token cost, \
                     and the {} driver has no zero-token read of utilization for this \
                     Account's login",
                    account.driver.name()
                ),
            ));
        }
        let taken = driver.takes_codex_config();
        if account.codex_config.is_some() && !taken {
            return Err(config.error_at(
                account.codex_config_line,
                &format!(
                    "accounts.{name}.codexConfig is for a codex Account (driver: codex); \
                     account '{name}' runs {}",
                    account.driver.name()
                ),
            ));
        }
    }
    Ok(())
}

fn check_capabilities_with(
    config: &Config,
    capabilities: impl Fn(crate::config::DriverKind) -> crate::driver::Capabilities,
) -> Result<(), crate::error::Error> {
    for (name, account) in &config.accounts {
        if account.limits.is_some() && !capabilities(account.driver).usage_reporting {
            return Err(config.error_at(
                account.limits_line,
                &format!(
                    "account '{name}' sets limits, but the {} driver cannot report \
                     utilization, so no ceiling could be kept; remove 'limits'",
                    account.driver.name()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Capabilities;

    #[test]
    fn limits_need_a_driver_that_reports_usage() {
        let config = crate::config::parse(
            "accounts:\n  work:\n    limits: {fiveHourMax: 60}\n  home: {}\n",
            "x.yaml",
        )
        .unwrap();
        let blind = |_| Capabilities {
            usage_reporting: false,
            budget_cap: false,
            tool_policy: false,
            session_id: false,
        };
        let e = check_capabilities_with(&config, blind).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::BadInput);
        let e = e.message;
        assert_eq!(
            e,
            "reading config x.yaml: line 3: account 'work' sets limits, but the claude-code \
             driver cannot report utilization, so no ceiling could be kept; remove 'limits'"
        );
        assert!(
            check_capabilities(&config).is_ok(),
            "claude-code reports usage"
        );
        let unlimited = crate::config::parse("accounts:\n  home: {}\n", "x.yaml").unwrap();
        assert!(check_capabilities_with(&unlimited, blind).is_ok());
    }

    #[test]
    fn a_permission_mode_is_judged_by_the_drivers_that_run_and_by_no_other() {
        let with = |mode: &str, drivers: &str| {
            let text = format!("defaults:\n  permissionMode: {mode}\naccounts:\n{drivers}");
            check_capabilities(&crate::config::parse(&text, "x.yaml").unwrap())
        };
        // Claude Code refuses `bypassPermissions` (nobody watches an unattended Run).
        let e = with("bypassPermissions", "  work: {}\n").unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::BadInput);
        assert!(
            e.message.starts_with(
                "reading config x.yaml: line 2: permissionMode 'bypassPermissions' is not one of"
            ),
            "{}",
            e.message
        );
        let e = with("dontask", "  work: {}\n  cx: {driver: codex}\n").unwrap_err();
        assert!(
            e.message.contains("did you mean 'dontAsk'"),
            "{}",
            e.message
        );
        // A night of Codex and Gemini Accounts only: Claude Code's modes bind nothing (on
        // this morning's main this config was refused).
        with("dontask", "  cx: {driver: codex}\n  gm: {driver: gemini}\n").unwrap();
        with("acceptEdits", "  work: {}\n").unwrap();
    }
}
