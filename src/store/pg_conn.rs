//! One PostgreSQL connection kept free of session state, so that a pooler in transaction mode (PgBouncer) can give each transaction another server connection: statements sent whole, their waits with the startup or the transaction, a lost connection made again, and the connection kept for the process's next Store.

use anyhow::{Context, Result};

use super::engine::{trace, Param, ToParam};

/// A PostgreSQL connection, kept free of session state: each statement is sent whole
/// (parsed, bound and run in one round trip, no name of its own), and the bounds on its
/// waits come with the connection's startup or its transaction, so a pooler in transaction
/// mode (PgBouncer) can give each transaction another server connection.
pub(crate) struct Pg {
    /// Always there but while the connection is parked, as the Store it served is dropped.
    client: Option<postgres::Client>,
    /// Where it connects again when the server dropped the connection.
    url: super::postgres::PgUrl,
    /// How the connection reached the server (TLS, and what of its certificate was checked).
    pub(super) reach: super::postgres::Reach,
    /// Inside a transaction a lost connection is the transaction's failure: it is made
    /// again only between transactions.
    pub(super) in_transaction: bool,
    /// How long a statement may wait for another's lock (`lock_timeout`): its bound on the
    /// server and in the watchdog follow from it.
    lock_wait: std::time::Duration,
    /// The lock wait the connection's startup gave every statement; `None` through a
    /// pooler that refuses startup settings.
    session_wait: Option<std::time::Duration>,
    /// A transaction begun and not yet sent: `BEGIN` and its `SET LOCAL`s go with its first
    /// statement, and a transaction that sends none costs nothing.
    begun: Option<String>,
}

impl Pg {
    pub(super) fn new(connected: super::postgres::Connected, url: super::postgres::PgUrl) -> Pg {
        Pg {
            client: Some(connected.client),
            url,
            reach: connected.reach,
            in_transaction: false,
            lock_wait: super::BUSY_TIMEOUT,
            session_wait: connected.session_wait,
            begun: None,
        }
    }

    fn client(&mut self) -> &mut postgres::Client {
        self.client
            .as_mut()
            .expect("a Pg's connection is taken only as it is dropped")
    }

    fn is_closed(&self) -> bool {
        self.client.as_ref().is_none_or(postgres::Client::is_closed)
    }

    /// Connects again when the connection was dropped (a server restart, a terminated
    /// backend), outside a transaction: the statement about to run is the first of the
    /// new connection.
    fn ready(&mut self) -> Result<()> {
        if !self.is_closed() || self.in_transaction {
            return Ok(());
        }
        self.reconnect()
    }

    fn reconnect(&mut self) -> Result<()> {
        tracing::warn!(
            "the connection to the store {} was lost; connecting again",
            self.url
        );
        let connected = super::postgres::connect(&self.url, self.lock_wait)?;
        self.client = Some(connected.client);
        self.reach = connected.reach;
        self.session_wait = connected.session_wait;
        Ok(())
    }

    /// One exchange with the server, under the watchdog's bound (see `crate::watchdog`).
    fn bounded<T>(&mut self, sql: &str, exchange: impl FnOnce(&mut postgres::Client) -> T) -> T {
        let step = format!("running {}", super::postgres::statement_name(sql));
        let bound = super::postgres::client_bound(self.lock_wait);
        let url = self.url.clone();
        crate::watchdog::bounded(&url, &step, bound, || exchange(self.client()))
    }

    /// Sets how long a statement waits for another's lock: the transactions that follow
    /// carry it (see [`Pg::bounds_are_local`]).
    pub(super) fn set_lock_wait(&mut self, wait: std::time::Duration) {
        self.lock_wait = wait;
    }

    /// Whether a transaction must set its own bounds: the connection's startup gave none,
    /// or other ones.
    fn bounds_are_local(&self) -> bool {
        self.session_wait != Some(self.lock_wait)
    }

    /// Runs a statement that changes rows in a transaction of its own that carries its
    /// bounds, when the connection's are not its own: a lock wait past the wanted one would
    /// reach the watchdog's bound instead of failing as a statement. A `SELECT` waits for no
    /// row's lock, and a statement in a transaction has the transaction's bounds.
    fn alone<T>(&mut self, sql: &str, run: impl FnOnce(&mut Pg) -> Result<T>) -> Result<T> {
        if self.in_transaction || reads(sql) || !self.bounds_are_local() {
            return run(self);
        }
        self.batch("BEGIN")?;
        match run(self) {
            Ok(out) => {
                self.batch("COMMIT")?;
                Ok(out)
            }
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    pub(super) fn query(
        &mut self,
        sql: &str,
        params: &[&dyn ToParam],
    ) -> Result<Vec<postgres::Row>> {
        let values: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
        let dollars = dollar_parameters(sql);
        self.again_if_lost(sql, |pg| {
            pg.alone(sql, |pg| {
                pg.send_begun()?;
                pg.bounded(sql, |client| client.query_typed(&dollars, &typed(&values)))
                    .map_err(pg_error)
                    .with_context(|| format!("running: {sql}"))
            })
        })
    }

    pub(super) fn execute(&mut self, sql: &str, params: &[&dyn ToParam]) -> Result<usize> {
        let values: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
        let dollars = dollar_parameters(sql);
        let n = self.again_if_lost(sql, |pg| {
            pg.alone(sql, |pg| {
                pg.send_begun()?;
                pg.bounded(sql, |client| {
                    client.execute_typed(&dollars, &typed(&values))
                })
                .map_err(pg_error)
                .with_context(|| format!("running: {sql}"))
            })
        })?;
        Ok(n as usize)
    }

    /// Runs a statement outside a transaction once more on a new connection when the one
    /// it was sent on had ended: the server said it was shutting down (it ran nothing
    /// after), or the connection closed under a `SELECT` (which changes nothing). A write
    /// whose connection closed under it may have landed, and is not sent twice.
    fn again_if_lost<T>(
        &mut self,
        sql: &str,
        mut run: impl FnMut(&mut Pg) -> Result<T>,
    ) -> Result<T> {
        self.ready()?;
        let in_transaction = self.in_transaction;
        match run(self) {
            Err(e) if !in_transaction && (is_shutdown(&e) || (self.is_closed() && reads(sql))) => {
                self.reconnect()?;
                run(self)
            }
            done => done,
        }
    }

    pub(super) fn batch(&mut self, sql: &str) -> Result<()> {
        self.ready()?;
        match sql {
            "BEGIN" => {
                self.begun = Some(self.begin_sql());
                self.in_transaction = true;
                return Ok(());
            }
            "COMMIT" | "ROLLBACK" if self.begun.take().is_some() => {
                self.in_transaction = false;
                return Ok(());
            }
            _ => {}
        }
        let sql = match self.begun.take() {
            Some(begin) => format!("{begin}; {sql}"),
            None => sql.to_string(),
        };
        let done = self.send(&sql);
        if matches!(sql.as_str(), "COMMIT" | "ROLLBACK") {
            self.in_transaction = false;
        }
        done
    }

    /// `BEGIN`, with the transaction's bounds where the connection's are not its own.
    fn begin_sql(&self) -> String {
        match self.bounds_are_local() {
            true => format!("BEGIN; {}", super::postgres::local_timeouts(self.lock_wait)),
            false => "BEGIN".into(),
        }
    }

    /// Sends the transaction's `BEGIN` ahead of its first statement, when it was not sent.
    fn send_begun(&mut self) -> Result<()> {
        match self.begun.take() {
            Some(begin) => self.send(&begin),
            None => Ok(()),
        }
    }

    /// One simple query's round trip, traced as sent.
    fn send(&mut self, sql: &str) -> Result<()> {
        let done = self
            .bounded(sql, |client| client.batch_execute(sql))
            .map_err(pg_error);
        trace(sql, 0);
        done
    }
}

/// The connection a process's last Store on PostgreSQL left, for its next: a tick opens the
/// store more than once (its round, then the day's sample), and each new connection costs
/// TCP, TLS, a login and the schema's check. Keyed by the URL with its settings.
static PARKED: std::sync::Mutex<Option<(String, super::postgres::Connected)>> =
    std::sync::Mutex::new(None);

fn parking_key(url: &super::postgres::PgUrl) -> String {
    format!("{url:?}")
}

/// The connection parked for `url`, when one is and it is still open.
pub(super) fn unpark(url: &super::postgres::PgUrl) -> Option<super::postgres::Connected> {
    let mut parked = PARKED.lock().unwrap_or_else(|p| p.into_inner());
    match parked.take() {
        Some((key, connected)) if key == parking_key(url) && !connected.client.is_closed() => {
            Some(connected)
        }
        other => {
            *parked = other;
            None
        }
    }
}

impl Drop for Pg {
    /// Parks the connection for the process's next Store, unless a transaction was left
    /// open on it (then it is closed, and the server rolls the transaction back).
    fn drop(&mut self) {
        if self.in_transaction && self.begun.is_none() {
            return;
        }
        let Some(client) = self.client.take().filter(|c| !c.is_closed()) else {
            return;
        };
        let connected = super::postgres::Connected {
            client,
            reach: self.reach.clone(),
            session_wait: self.session_wait,
        };
        let mut parked = PARKED.lock().unwrap_or_else(|p| p.into_inner());
        *parked = Some((parking_key(&self.url), connected));
    }
}

/// Whether a statement only reads: a `SELECT`.
fn reads(sql: &str) -> bool {
    sql.trim_start()
        .get(..6)
        .is_some_and(|w| w.eq_ignore_ascii_case("SELECT"))
}

/// Whether the server ended the connection as it shut down or restarted (`57P01`,
/// `57P02`): sent before anything after it ran.
fn is_shutdown(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<PgError>()
            .is_some_and(|pg| matches!(pg.code.as_deref(), Some("57P01" | "57P02")))
    })
}

/// The type a parameter is sent with: none (OID 0), so the server infers it from the
/// statement as it would for a prepared one, and the value is read from its text.
fn unspecified() -> postgres::types::Type {
    postgres::types::Type::new(
        "unspecified".into(),
        0,
        postgres::types::Kind::Pseudo,
        "pg_catalog".into(),
    )
}

/// Values as the driver takes them, each with its (unspecified) type.
fn typed<'v>(
    values: &'v [Param<'_>],
) -> Vec<(
    &'v (dyn postgres::types::ToSql + Sync),
    postgres::types::Type,
)> {
    values
        .iter()
        .map(|v| (v as &(dyn postgres::types::ToSql + Sync), unspecified()))
        .collect()
}

/// A PostgreSQL error in the server's words, with its SQLSTATE kept for the callers that
/// tell one kind from another (a unique violation: another machine took the Account).
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub(crate) struct PgError {
    text: String,
    pub(super) code: Option<String>,
}

pub(crate) fn pg_error(e: postgres::Error) -> anyhow::Error {
    anyhow::Error::new(PgError {
        text: super::postgres::describe(&e),
        code: e.code().map(|c| c.code().to_string()),
    })
}

impl postgres::types::ToSql for Param<'_> {
    /// A value as its text: its type is left to the server (see [`unspecified`]), which
    /// reads a count bound where it inferred text as its digits, as SQLite would.
    fn to_sql(
        &self,
        _: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>>
    {
        use std::fmt::Write;
        match *self {
            Param::Null => return Ok(postgres::types::IsNull::Yes),
            Param::Int(i) => write!(out, "{i}")?,
            Param::Real(r) => write!(out, "{r}")?,
            Param::Text(t) => out.extend_from_slice(t.as_bytes()),
        }
        Ok(postgres::types::IsNull::No)
    }

    fn accepts(_: &postgres::types::Type) -> bool {
        true
    }

    fn encode_format(&self, _: &postgres::types::Type) -> postgres::types::Format {
        postgres::types::Format::Text
    }

    postgres::types::to_sql_checked!();
}

/// `?N` parameters as PostgreSQL writes them (`$N`), leaving quoted text alone.
fn dollar_parameters(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '?') if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push('$');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_as_postgresql_writes_them_outside_quotes() {
        assert_eq!(
            dollar_parameters("SELECT '?1', \"a?2\" FROM t WHERE a = ?1 AND b IN (?12, ?)"),
            "SELECT '?1', \"a?2\" FROM t WHERE a = $1 AND b IN ($12, ?)"
        );
    }
}
