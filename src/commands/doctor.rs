//! `owl doctor`: checks the agent CLI and its version, credential stores, git and the database.

use anyhow::Result;

use super::Ctx;
use crate::driver;

pub fn run(ctx: &Ctx) -> Result<u8> {
    let mut failures = 0;
    let mut check = |ok: bool, what: String| {
        outln!("{} {what}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            failures += 1;
        }
    };
    check(true, format!("config: {}", ctx.config.source));
    let git = git2::Version::get();
    let (maj, min, rev) = git.libgit2_version();
    check(true, format!("git: libgit2 {maj}.{min}.{rev}"));

    for (name, account) in &ctx.config.accounts {
        let d = driver::for_kind(account.driver);
        let command = &ctx.config.drivers.get(account.driver).command;
        let cli_ok = match driver::check_agent(d.as_ref(), command, account) {
            Ok(v) => {
                let what = format!("{} {v} at '{}'", account.driver.name(), command.display());
                check(true, format!("account {name}: {what}"));
                true
            }
            Err(why) => {
                check(false, format!("account {name}: {why}"));
                false
            }
        };
        // The zero-token probe: a credential store that exists may still hold no login.
        // Run in the state dir when there is one; doctor creates nothing.
        let cwd = Some(ctx.config.state_dir.clone())
            .filter(|d| d.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let probe = if cli_ok {
            crate::usage::probe(d.as_ref(), command, account, &cwd)
        } else {
            crate::usage::ProbeOutcome::Failed("the agent CLI is unusable (above)".into())
        };
        match probe.logged_in(account) {
            Some(true) => check(
                true,
                format!("account {name}: logged in (probe: {})", probe.describe()),
            ),
            Some(false) => check(
                false,
                format!(
                    "account {name}: not logged in (probe: {}); log in with `{}`, then /login",
                    probe.describe(),
                    crate::schedule::login_command(account.credential_store.as_deref())
                ),
            ),
            None => check(
                false,
                format!(
                    "account {name}: could not check the login: {}",
                    probe.describe()
                ),
            ),
        }
        match &account.credential_store {
            Some(dir) if dir.is_dir() => check(
                true,
                format!("account {name}: credential store {}", dir.display()),
            ),
            Some(dir) => check(
                false,
                format!(
                    "account {name}: credential store {} does not exist; log in once with \
                     CLAUDE_CONFIG_DIR={} claude",
                    dir.display(),
                    dir.display()
                ),
            ),
            None => check(
                true,
                format!("account {name}: uses the user's normal agent login"),
            ),
        }
        if !account.env.is_empty() {
            let keys: Vec<&str> = account.env.keys().map(String::as_str).collect();
            check(
                true,
                format!("account {name}: sets {} (values hidden)", keys.join(", ")),
            );
        }
    }

    match ctx.read_store() {
        Ok(Some(store)) => {
            let version = store.schema_version().unwrap_or(-1);
            let integrity = store.quick_check().unwrap_or_else(|e| e.to_string());
            check(
                integrity == "ok",
                format!(
                    "database {}: schema {version}, integrity {integrity}",
                    store.path().display()
                ),
            );
            for name in ctx.config.accounts.keys() {
                let note = store.account_note(name)?;
                if let Some(p) = note.agent_problem {
                    check(
                        false,
                        format!("account {name}: the last tick refused to run: {p}"),
                    );
                }
                if let Some(p) = note.not_logged_in {
                    check(
                        false,
                        format!("account {name}: not logged in at its last Run: {p}"),
                    );
                }
            }
        }
        Ok(None) => check(
            true,
            format!(
                "database: none yet at {}",
                ctx.config.state_dir.join("owl.db").display()
            ),
        ),
        Err(e) => check(false, format!("database: {e:#}")),
    }
    if failures > 0 {
        outln!(
            "{failures} problem{} found",
            if failures == 1 { "" } else { "s" }
        );
        return Ok(crate::error::EXIT_FAILURE);
    }
    outln!("all checks passed");
    Ok(0)
}
