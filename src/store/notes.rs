//! Per-Account notes that outlive a Run: "not logged in", an agent CLI owl cannot use, an outage's back-off.

use super::engine::{params, Db};
use anyhow::Result;
use chrono::{DateTime, Utc};

use super::{time_col, Store};
use crate::clock::rfc3339;
use crate::model::AccountNote;

impl Store {
    /// Whether the Account's login was seen to work: a Run started on it (the CLI's own
    /// word on its login is asked before every Run, and refuses one without) and did not end
    /// for want of a login.
    pub(crate) fn account_login_seen(&self, account: &str) -> Result<bool> {
        // On a shared store, a login is seen on this machine by this machine's Runs.
        self.db.exists(
            "SELECT 1 FROM runs WHERE account = ?1 \
             AND (cause IS NULL OR cause != 'not_logged_in') \
             AND (CAST(?2 AS TEXT) IS NULL OR machine = ?2) LIMIT 1",
            params![account, self.local_machine()],
        )
    }

    /// The note on one Account (empty when there is none): on a shared store, what holds
    /// on this machine alone (its login, probe, agent CLI) is this machine's own.
    pub(crate) fn account_note(&self, account: &str) -> Result<AccountNote> {
        let mut note = self.shared_note(account)?;
        if let Some(machine) = self.local_machine() {
            let own = self.db.query_opt(
                "SELECT not_logged_in, agent_problem, last_probe, last_probe_at, agent_checked, \
                 agent_checked_at, not_logged_in_at, agent_checked_version \
                 FROM machine_notes WHERE account = ?1 AND machine = ?2",
                params![account, machine],
                |r| {
                    Ok(AccountNote {
                        not_logged_in: r.get(0)?,
                        agent_problem: r.get(1)?,
                        last_probe: r.get(2)?,
                        last_probe_at: time_col(r.get(3)?),
                        agent_checked: r.get(4)?,
                        agent_checked_at: time_col(r.get(5)?),
                        not_logged_in_at: time_col(r.get(6)?),
                        agent_checked_version: r.get(7)?,
                        ..Default::default()
                    })
                },
            )?;
            let own = own.unwrap_or_default();
            note.not_logged_in = own.not_logged_in;
            note.agent_problem = own.agent_problem;
            note.last_probe = own.last_probe;
            note.last_probe_at = own.last_probe_at;
            note.agent_checked = own.agent_checked;
            note.agent_checked_at = own.agent_checked_at;
            note.not_logged_in_at = own.not_logged_in_at;
            note.agent_checked_version = own.agent_checked_version;
        }
        Ok(note)
    }

    fn shared_note(&self, account: &str) -> Result<AccountNote> {
        Ok(self
            .db
            .query_opt(
                "SELECT not_logged_in, agent_problem, last_probe, last_probe_at, updated_at, \
                 backoff_until, outages, agent_checked, agent_checked_at, rate_limited_until, \
                 on_credits_until, on_credits_window, not_logged_in_at, agent_checked_version \
                 FROM account_notes \
                 WHERE account = ?1",
                params![account],
                |r| {
                    Ok(AccountNote {
                        not_logged_in: r.get(0)?,
                        agent_problem: r.get(1)?,
                        last_probe: r.get(2)?,
                        last_probe_at: time_col(r.get(3)?),
                        updated_at: time_col(r.get(4)?),
                        backoff_until: time_col(r.get(5)?),
                        outages: r.get(6)?,
                        agent_checked: r.get(7)?,
                        agent_checked_at: time_col(r.get(8)?),
                        rate_limited_until: time_col(r.get(9)?),
                        on_credits_until: time_col(r.get(10)?),
                        on_credits_window: r.get(11)?,
                        not_logged_in_at: time_col(r.get(12)?),
                        agent_checked_version: r.get(13)?,
                        ..Default::default()
                    })
                },
            )?
            .unwrap_or_default())
    }

    /// Sets or clears "not logged in" on an Account.
    pub(crate) fn set_not_logged_in(
        &mut self,
        account: &str,
        why: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.set_not_logged_in_seen(account, why, None, now)
    }

    /// [`Store::set_not_logged_in`], remembering the newest change of the Account's
    /// credential store at the finding: a login written there later is noticed by it.
    pub(crate) fn set_not_logged_in_seen(
        &mut self,
        account: &str,
        why: Option<&str>,
        credential_store: Option<&std::path::Path>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let seen = why
            .and(credential_store)
            .and_then(|dir| crate::sys::newest_change(dir, 2))
            .map(rfc3339);
        self.upsert_note(account, "not_logged_in_at", seen.as_deref(), now)?;
        self.upsert_note(account, "not_logged_in", why, now)
    }

    /// Sets or clears the agent CLI problem on an Account.
    pub(crate) fn set_agent_problem(
        &mut self,
        account: &str,
        why: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.upsert_note(account, "agent_problem", why, now)
    }

    /// Sets (or with `None` clears) the outage back-off of an Account.
    pub(crate) fn set_backoff(
        &mut self,
        account: &str,
        until: Option<DateTime<Utc>>,
        outages: u32,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO account_notes (account, backoff_until, outages, updated_at) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT(account) DO UPDATE SET \
                 backoff_until = ?2, outages = ?3, updated_at = ?4",
                params![account, until.map(rfc3339), outages, rfc3339(now)],
            )?;
            Ok(())
        })
    }

    /// Sets or clears a reactive Account's wait after a rate limit.
    pub(crate) fn set_rate_limited_until(
        &mut self,
        account: &str,
        until: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let until = until.map(rfc3339);
        self.upsert_note(account, "rate_limited_until", until.as_deref(), now)
    }

    /// Holds an Account off extra usage until `until`, the reset of `window` (or, with
    /// `None`, releases it).
    pub(crate) fn set_on_credits(
        &mut self,
        account: &str,
        hold: Option<(&str, DateTime<Utc>)>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let until = hold.map(|(_, t)| rfc3339(t));
        self.upsert_note(account, "on_credits_until", until.as_deref(), now)?;
        self.upsert_note(account, "on_credits_window", hold.map(|(w, _)| w), now)
    }

    /// Records the agent CLI file that passed the version check, and its version.
    pub(crate) fn set_agent_checked(
        &mut self,
        account: &str,
        identity: &str,
        version: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let at = rfc3339(now);
        let notes = [
            ("agent_checked", Some(identity)),
            ("agent_checked_version", Some(version)),
            ("agent_checked_at", Some(at.as_str())),
        ];
        // Not flushed: a check lost at a power cut is only made again.
        self.upsert_notes(account, &notes, now, false)
    }

    /// Records what a preflight probe learned.
    pub(crate) fn set_last_probe(
        &mut self,
        account: &str,
        what: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let at = rfc3339(now);
        let notes = [
            ("last_probe", Some(what)),
            ("last_probe_at", Some(at.as_str())),
        ];
        // Not flushed: the probe's figures are (as Snapshots); this only dates it.
        self.upsert_notes(account, &notes, now, false)
    }

    fn upsert_note(
        &mut self,
        account: &str,
        column: &'static str,
        value: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        self.upsert_notes(account, &[(column, value)], now, true)
    }

    /// Sets the Account's `notes` (columns, each with its value) in one write, flushed to
    /// disk or not; a machine-local one on this machine's row of a shared store.
    fn upsert_notes(
        &mut self,
        account: &str,
        notes: &[(&'static str, Option<&str>)],
        now: DateTime<Utc>,
        flushed: bool,
    ) -> Result<()> {
        let machine = self.local_machine().map(String::from);
        let at = rfc3339(now);
        let write = |tx: &Db| {
            for &(column, value) in notes {
                let machine = machine
                    .as_deref()
                    .filter(|_| MACHINE_LOCAL.contains(&column));
                upsert_one(tx, machine, account, column, value, &at)?;
            }
            Ok(())
        };
        match flushed {
            true => self.write(write),
            false => self.write_unflushed(write),
        }
    }
}

/// Sets one column of the Account's note: on `machine`'s own row, or the shared one.
fn upsert_one(
    tx: &Db,
    machine: Option<&str>,
    account: &str,
    column: &str,
    value: Option<&str>,
    at: &str,
) -> Result<()> {
    match machine {
        Some(machine) => tx.execute(
            &format!(
                "INSERT INTO machine_notes (account, machine, {column}, updated_at) \
                 VALUES (?1, ?4, ?2, ?3) ON CONFLICT(account, machine) DO UPDATE SET \
                 {column} = ?2, updated_at = ?3"
            ),
            params![account, value, at, machine],
        )?,
        None => tx.execute(
            &format!(
                "INSERT INTO account_notes (account, {column}, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT(account) DO UPDATE SET {column} = ?2, updated_at = ?3"
            ),
            params![account, value, at],
        )?,
    };
    Ok(())
}

/// What one machine learns of an Account that holds on it alone: its login there, its
/// probe, the agent CLI installed there. The rest (a rejection, a back-off, extra usage) is
/// the plan's, shared by every machine.
const MACHINE_LOCAL: [&str; 8] = [
    "not_logged_in",
    "not_logged_in_at",
    "agent_problem",
    "last_probe",
    "last_probe_at",
    "agent_checked",
    "agent_checked_at",
    "agent_checked_version",
];

impl Store {}
