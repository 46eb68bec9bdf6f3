//! What every command works from: the loaded config and the paths, store and Executors it gives, the user-only files owl makes, and JSON printed for scripts.

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::Config;
use crate::model::Job;
use crate::store::Store;

/// What every command works from.
pub(crate) struct Ctx {
    pub(crate) config: Config,
    /// The learned reserve in force for each Account that has one (`reserve::in_force`):
    /// the bounds in `config` as they stand at any later moment of a Run.
    pub(crate) reserves: std::collections::BTreeMap<String, super::reserve::Reserve>,
}

impl Ctx {
    pub(super) fn db_path(&self) -> PathBuf {
        self.config.state().db()
    }

    pub(super) fn lock_path(&self) -> PathBuf {
        self.config.state().lock()
    }

    pub(super) fn worktrees_dir(&self) -> PathBuf {
        self.config.state().worktrees()
    }

    /// What runs `account`'s agent: its Runs, and the CLI's checks and probes.
    pub(super) fn executor_of(
        &self,
        account: &crate::config::Account,
    ) -> Box<dyn crate::supervise::Executor> {
        crate::supervise::executor_of(account, &self.config)
    }

    /// [`Ctx::worktrees_dir`] as printed.
    pub(super) fn worktrees_text(&self) -> String {
        self.worktrees_dir().display().to_string()
    }

    /// Opens the database for a command that writes, creating the state dir (0700).
    pub(super) fn open_store(&self) -> Result<Store> {
        ensure_private_dir(&self.config.state_dir)?;
        let store = match &self.config.store {
            Some(url) => Store::open_postgres(url),
            None => Store::open(&self.db_path()),
        };
        Ok(store?.on_machine(&self.config.machine))
    }

    /// Opens the database for a command that only reads; `None` before the first write.
    pub(super) fn read_store(&self) -> Result<Option<Store>> {
        let dir = &self.config.state_dir;
        if dir.exists() && !dir.is_dir() {
            // Not "nothing yet": every tick would fail here.
            anyhow::bail!("state dir {} is not a directory", dir.display());
        }
        let store = match &self.config.store {
            Some(url) => Some(Store::open_postgres(url)?),
            None => Store::open_existing(&self.db_path())?,
        };
        Ok(store.map(|s| s.on_machine(&self.config.machine)))
    }

    /// The Account named `only`, or every Account; a name not configured is bad input.
    pub(super) fn accounts_named(&self, only: Option<&str>) -> Result<Vec<String>> {
        let accounts = &self.config.accounts;
        match only {
            Some(name) if accounts.contains_key(name) => Ok(vec![name.to_string()]),
            Some(name) => {
                let known: Vec<&str> = accounts.keys().map(String::as_str).collect();
                crate::bad_input!(
                    "no account '{name}' in {} (accounts: {}){}",
                    self.config.source,
                    known.join(", "),
                    crate::config::did_you_mean(name, &known)
                )
            }
            None => Ok(accounts.keys().cloned().collect()),
        }
    }

    /// Looks a Job up, or fails with a usage error naming it.
    pub(super) fn job(&self, store: &Store, id: &str) -> Result<Job> {
        if let Some(job) = store.job(id)? {
            return Ok(job);
        }
        let mut ids = Vec::new();
        store.for_each_listed_job(true, |j| {
            ids.push(j.id.to_string());
            Ok(())
        })?;
        let known: Vec<&str> = ids.iter().map(String::as_str).collect();
        let hint = crate::config::did_you_mean(id, &known);
        Err(
            crate::error::Error::bad_input(format!("no job '{id}'{hint} (see `owl jobs --all`)"))
                .into(),
        )
    }
}

/// Creates a directory (and its parents) readable by the user alone.
pub(crate) fn ensure_private_dir(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// Creates a new file readable by the user alone.
pub(super) fn create_private_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// Prints JSON for scripts, pretty, with every control character escaped: serde_json
/// escapes C0 itself, and the formatter the rest, so no pass over the text is needed.
pub(super) fn print_json(value: &impl Serialize) -> Result<()> {
    let mut out = Vec::with_capacity(4096);
    let mut ser =
        serde_json::Serializer::with_formatter(&mut out, crate::output::InertJson::default());
    value.serialize(&mut ser)?;
    out.push(b'\n');
    crate::output::write_raw(&out).context("writing JSON to stdout")?;
    Ok(())
}

pub(super) fn opt_time(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(crate::clock::rfc3339)
}
