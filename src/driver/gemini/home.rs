//! A Gemini Run's own home: the settings owl writes for it and the login copied from the Account's store, so that no settings file the agent can write (the store's, the worktree's) steers a Run.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::config::Account;

/// The directory under a Run's files that is its `GEMINI_CLI_HOME`.
const RUN_HOME: &str = "gemini-home";

/// The login files a store keeps under `.gemini/`, copied as they are: an OAuth login and
/// what the CLI keeps beside it. An API-key login lives in the Account's `env`.
const LOGIN_FILES: &[&str] = &[
    "oauth_creds.json",
    "google_accounts.json",
    "installation_id",
    "user_id",
];

/// The most a login file or the store's settings may hold (they hold a few hundred bytes).
const FILE_CAP: u64 = 64 * 1024;

/// The store's settings a Run keeps: which login it uses and scalars that steer nothing a
/// Run runs (retries, update checks, statistics, the model). Everything else (hooks, MCP
/// servers, a tool discovery command, extensions, an endpoint) is the agent's to plant and
/// is left behind.
const KEPT_SETTINGS: &[&[&str]] = &[
    &["security", "auth", "selectedType"],
    &["general", "maxAttempts"],
    &["general", "enableAutoUpdate"],
    &["general", "enableAutoUpdateNotification"],
    &["privacy", "usageStatisticsEnabled"],
    &["model", "name"],
];

/// The Run's home and the files owl writes there before the CLI starts.
pub(super) struct RunHome {
    pub(super) dir: PathBuf,
    pub(super) files: Vec<(PathBuf, String)>,
}

/// Composes the Run's home under `files_dir` from the Account's store: owl's settings (the
/// store's login choice and harmless scalars; no hook; folder trust off, so that the
/// worktree, which a Run starts untrusted, is neither trusted nor refused) and the login files.
pub(super) fn run_home(account: &Account, files_dir: &Path) -> RunHome {
    let dir = files_dir.join(RUN_HOME);
    let store = store_home(account).map(|h| h.join(".gemini"));
    let read = |name: &str| {
        let path = store.as_ref()?.join(name);
        crate::untrusted::read_to_string(&path, FILE_CAP).ok()
    };
    let stored: Value = read("settings.json")
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    let mut files = vec![(
        dir.join(".gemini/settings.json"),
        run_settings(&stored).to_string(),
    )];
    for name in LOGIN_FILES {
        if let Some(body) = read(name) {
            files.push((dir.join(".gemini").join(name), body));
        }
    }
    RunHome { dir, files }
}

/// The login the Account's store chose (`security.auth.selectedType`), if it says.
pub(super) fn stored_login_choice(account: &Account) -> Option<String> {
    let path = store_home(account)?.join(".gemini/settings.json");
    let text = crate::untrusted::read_to_string(&path, FILE_CAP).ok()?;
    let stored: Value = serde_json::from_str(&text).ok()?;
    let choice = stored.pointer("/security/auth/selectedType")?.as_str()?;
    Some(choice.to_string())
}

/// The settings a Run reads: the kept scalars of the store's, then owl's own.
fn run_settings(stored: &Value) -> Value {
    let mut settings = json!({});
    for path in KEPT_SETTINGS {
        let found = path.iter().try_fold(stored, |v, key| v.get(key));
        if let Some(value) = found.filter(|v| !v.is_object() && !v.is_array()) {
            set(&mut settings, path, value.clone());
        }
    }
    set(
        &mut settings,
        &["security", "folderTrust", "enabled"],
        json!(false),
    );
    set(&mut settings, &["hooksConfig", "enabled"], json!(false));
    settings
}

fn set(root: &mut Value, path: &[&str], value: Value) {
    let (last, parents) = path.split_last().expect("a settings path has a key");
    let mut at = root;
    for key in parents {
        at = at
            .as_object_mut()
            .expect("owl's settings are objects")
            .entry(*key)
            .or_insert_with(|| json!({}));
    }
    at[*last] = value;
}

/// The home the CLI would use for the Account: its `env`'s `GEMINI_CLI_HOME`, its
/// `credentialStore`, else the home directory.
pub(super) fn store_home(account: &Account) -> Option<PathBuf> {
    account
        .env
        .get("GEMINI_CLI_HOME")
        .map(PathBuf::from)
        .or_else(|| account.credential_store.clone())
        .or_else(|| account.env.get("HOME").map(PathBuf::from))
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_keeps_the_stores_login_choice_and_nothing_it_could_run() {
        let stored = json!({
            "security": {"auth": {"selectedType": "oauth-personal"}, "folderTrust": {"enabled": true}},
            "general": {"maxAttempts": 1},
            "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "x"}]}]},
            "hooksConfig": {"enabled": true},
            "mcpServers": {"planted": {"command": "sh"}},
            "tools": {"discoveryCommand": "x"},
            "model": {"name": {"nested": "not a scalar"}},
        });
        assert_eq!(
            run_settings(&stored),
            json!({
                "security": {"auth": {"selectedType": "oauth-personal"}, "folderTrust": {"enabled": false}},
                "general": {"maxAttempts": 1},
                "hooksConfig": {"enabled": false},
            })
        );
    }

    #[test]
    fn the_login_files_are_copied_and_a_symlink_is_not_followed() {
        let store = tempfile::tempdir().unwrap();
        let gemini = store.path().join(".gemini");
        std::fs::create_dir_all(&gemini).unwrap();
        std::fs::write(gemini.join("oauth_creds.json"), "{\"refresh_token\":\"r\"}").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", gemini.join("google_accounts.json")).unwrap();
        let account = Account::local(
            crate::config::DriverKind::Gemini,
            Some(store.path().to_path_buf()),
            crate::config::Env(Default::default()),
        );
        let home = run_home(&account, Path::new("/run/files"));
        assert_eq!(home.dir, Path::new("/run/files/gemini-home"));
        let names: Vec<String> = home
            .files
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "/run/files/gemini-home/.gemini/settings.json",
                "/run/files/gemini-home/.gemini/oauth_creds.json",
            ]
        );
    }
}
