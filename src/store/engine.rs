//! The SQL engine under the store: a statement, its parameters and its rows in one small interface, so that what owl asks of its state is written once.
//!
//! Statements are written in the SQL both engines speak (`?N` parameters, `ON CONFLICT`,
//! `RETURNING`, quoted `"window"`); an engine translates what it must. A row's text is
//! borrowed from the engine's own row, never copied, so a listing of ten thousand Jobs
//! costs what the engine costs.

use anyhow::{Context, Result};

/// A value bound to one of a statement's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Param<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
}

/// What can be bound to a parameter.
pub(crate) trait ToParam {
    fn to_param(&self) -> Param<'_>;
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl ToParam for $t {
            fn to_param(&self) -> Param<'_> {
                Param::Int(*self as i64)
            }
        }
    )*};
}
int_param!(i64, i32, u32, u64, usize);

impl ToParam for bool {
    fn to_param(&self) -> Param<'_> {
        Param::Int(i64::from(*self))
    }
}

impl ToParam for f64 {
    fn to_param(&self) -> Param<'_> {
        Param::Real(*self)
    }
}

impl ToParam for str {
    fn to_param(&self) -> Param<'_> {
        Param::Text(self)
    }
}

impl ToParam for String {
    fn to_param(&self) -> Param<'_> {
        Param::Text(self)
    }
}

impl<T: ToParam + ?Sized> ToParam for &T {
    fn to_param(&self) -> Param<'_> {
        (**self).to_param()
    }
}

impl<T: ToParam> ToParam for Option<T> {
    fn to_param(&self) -> Param<'_> {
        match self {
            Some(v) => v.to_param(),
            None => Param::Null,
        }
    }
}

/// A statement's parameters, in order: `params![a, b]` binds `?1` and `?2`.
macro_rules! params {
    ($($p:expr),* $(,)?) => {
        &[$(&$p as &dyn $crate::store::engine::ToParam),*] as &[&dyn $crate::store::engine::ToParam]
    };
}
pub(crate) use params;

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match *self {
            Param::Null => ValueRef::Null,
            Param::Int(i) => ValueRef::Integer(i),
            Param::Real(r) => ValueRef::Real(r),
            Param::Text(t) => ValueRef::Text(t.as_bytes()),
        }))
    }
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

/// One row of a result, as the engine gave it.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Postgres(&'r postgres::Row),
}

impl<'r> Row<'r> {
    /// Column `i` as `T`.
    pub(crate) fn get<T: Column>(&self, i: usize) -> Result<T> {
        let value = match self {
            Row::Sqlite(r) => T::from_sqlite(r, i).map_err(anyhow::Error::from),
            Row::Postgres(r) => T::from_pg(r, i),
        };
        value.with_context(|| format!("reading column {i}"))
    }

    /// Column `i`'s text, borrowed from the row.
    pub(crate) fn text(&self, i: usize) -> Result<&'r str> {
        self.opt_text(i)?
            .with_context(|| format!("column {i} is NULL, not text"))
    }

    /// Column `i`'s text, borrowed from the row, or `None` when it is NULL.
    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<&'r str>> {
        match *self {
            Row::Sqlite(r) => Ok(r.get_ref(i)?.as_str_or_null()?),
            Row::Postgres(r) => Ok(r.try_get(i)?),
        }
    }
}

/// What a column can be read as.
pub(crate) trait Column: Sized {
    fn from_sqlite(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self>;
    /// `None` for NULL.
    fn from_pg_nullable(row: &postgres::Row, i: usize) -> Result<Option<Self>>;

    fn from_pg(row: &postgres::Row, i: usize) -> Result<Self> {
        Self::from_pg_nullable(row, i)?.with_context(|| format!("column {i} is NULL"))
    }
}

macro_rules! column {
    ($($t:ty),*) => {$(
        impl Column for $t {
            fn from_sqlite(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
                row.get(i)
            }
            fn from_pg_nullable(row: &postgres::Row, i: usize) -> Result<Option<Self>> {
                Ok(pg_int(row, i)?.map(<$t>::try_from).transpose()?)
            }
        }
    )*};
}
column!(i64, i32, u32, u64);

/// An integer column of any width (a count is BIGINT, an expression's may be INT4).
fn pg_int(row: &postgres::Row, i: usize) -> Result<Option<i64>> {
    use postgres::types::Type;
    Ok(match *row.columns()[i].type_() {
        Type::INT2 => row.try_get::<_, Option<i16>>(i)?.map(i64::from),
        Type::INT4 => row.try_get::<_, Option<i32>>(i)?.map(i64::from),
        Type::BOOL => row.try_get::<_, Option<bool>>(i)?.map(i64::from),
        _ => row.try_get::<_, Option<i64>>(i)?,
    })
}

impl Column for f64 {
    fn from_sqlite(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        row.get(i)
    }
    fn from_pg_nullable(row: &postgres::Row, i: usize) -> Result<Option<Self>> {
        use postgres::types::Type;
        Ok(match *row.columns()[i].type_() {
            Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?,
            Type::FLOAT4 => row.try_get::<_, Option<f32>>(i)?.map(f64::from),
            _ => pg_int(row, i)?.map(|v| v as f64),
        })
    }
}

impl Column for bool {
    fn from_sqlite(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        row.get(i)
    }
    fn from_pg_nullable(row: &postgres::Row, i: usize) -> Result<Option<Self>> {
        Ok(pg_int(row, i)?.map(|v| v != 0))
    }
}

impl Column for String {
    fn from_sqlite(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        row.get(i)
    }
    fn from_pg_nullable(row: &postgres::Row, i: usize) -> Result<Option<Self>> {
        Ok(row.try_get(i)?)
    }
}

impl<T: Column> Column for Option<T> {
    fn from_sqlite(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        match row.get_ref(i)? {
            rusqlite::types::ValueRef::Null => Ok(None),
            _ => T::from_sqlite(row, i).map(Some),
        }
    }
    fn from_pg_nullable(row: &postgres::Row, i: usize) -> Result<Option<Self>> {
        Ok(Some(T::from_pg_nullable(row, i)?))
    }
}

/// An open connection: every statement of the store goes through here.
pub(crate) enum Db {
    Sqlite(rusqlite::Connection),
    Postgres(Box<std::cell::RefCell<Pg>>),
}

/// A PostgreSQL connection, kept free of session state: each statement is sent whole
/// (parsed, bound and run in one round trip, no name of its own), and the bounds on its
/// waits come with the connection's startup or its transaction, so a pooler in transaction
/// mode (PgBouncer) can give each transaction another server connection.
pub(crate) struct Pg {
    client: postgres::Client,
    /// Where it connects again when the server dropped the connection.
    url: super::postgres::PgUrl,
    /// How the connection reached the server (TLS, and what of its certificate was checked).
    reach: super::postgres::Reach,
    /// Inside a transaction a lost connection is the transaction's failure: it is made
    /// again only between transactions.
    in_transaction: bool,
    /// How long a statement may wait for another's lock (`lock_timeout`): its bound on the
    /// server and in the watchdog follow from it.
    lock_wait: std::time::Duration,
    /// The lock wait the connection's startup gave every statement; `None` through a
    /// pooler that refuses startup settings.
    session_wait: Option<std::time::Duration>,
}

impl Pg {
    fn new(connected: super::postgres::Connected, url: super::postgres::PgUrl) -> Pg {
        Pg {
            client: connected.client,
            url,
            reach: connected.reach,
            in_transaction: false,
            lock_wait: super::BUSY_TIMEOUT,
            session_wait: connected.session_wait,
        }
    }

    /// Connects again when the connection was dropped (a server restart, a terminated
    /// backend), outside a transaction: the statement about to run is the first of the
    /// new connection.
    fn ready(&mut self) -> Result<()> {
        if !self.client.is_closed() || self.in_transaction {
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
        self.client = connected.client;
        self.reach = connected.reach;
        self.session_wait = connected.session_wait;
        Ok(())
    }

    /// One exchange with the server, under the watchdog's bound (see `crate::watchdog`).
    fn bounded<T>(&mut self, sql: &str, exchange: impl FnOnce(&mut postgres::Client) -> T) -> T {
        let step = format!("running {}", super::postgres::statement_name(sql));
        let bound = super::postgres::client_bound(self.lock_wait);
        crate::watchdog::bounded(&self.url, &step, bound, || exchange(&mut self.client))
    }

    /// Sets how long a statement waits for another's lock: the transactions that follow
    /// carry it (see [`Pg::bounds_are_local`]).
    fn set_lock_wait(&mut self, wait: std::time::Duration) {
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
        trace("BEGIN", 0);
        match run(self) {
            Ok(out) => {
                self.batch("COMMIT")?;
                trace("COMMIT", 0);
                Ok(out)
            }
            Err(e) => {
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        }
    }

    fn query(&mut self, sql: &str, params: &[&dyn ToParam]) -> Result<Vec<postgres::Row>> {
        let values: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
        let dollars = dollar_parameters(sql);
        self.again_if_lost(sql, |pg| {
            pg.alone(sql, |pg| {
                pg.bounded(sql, |client| client.query_typed(&dollars, &typed(&values)))
                    .map_err(pg_error)
                    .with_context(|| format!("running: {sql}"))
            })
        })
    }

    fn execute(&mut self, sql: &str, params: &[&dyn ToParam]) -> Result<usize> {
        let values: Vec<Param<'_>> = params.iter().map(|p| p.to_param()).collect();
        let dollars = dollar_parameters(sql);
        let n = self.again_if_lost(sql, |pg| {
            pg.alone(sql, |pg| {
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
            Err(e)
                if !in_transaction
                    && (is_shutdown(&e) || (self.client.is_closed() && reads(sql))) =>
            {
                self.reconnect()?;
                run(self)
            }
            done => done,
        }
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.ready()?;
        // A transaction begun where the connection's bounds are not its own sets them, in
        // the same round trip.
        let sql = match sql {
            "BEGIN" if self.bounds_are_local() => {
                format!("BEGIN; {}", super::postgres::local_timeouts(self.lock_wait))
            }
            _ => sql.to_string(),
        };
        let done = self
            .bounded(&sql, |client| client.batch_execute(&sql))
            .map_err(pg_error);
        match sql.split(';').next() {
            Some("BEGIN") => self.in_transaction = done.is_ok(),
            Some("COMMIT" | "ROLLBACK") => self.in_transaction = false,
            _ => {}
        }
        done
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
    code: Option<String>,
}

pub(crate) fn pg_error(e: postgres::Error) -> anyhow::Error {
    anyhow::Error::new(PgError {
        text: super::postgres::describe(&e),
        code: e.code().map(|c| c.code().to_string()),
    })
}

/// Whether `e` is a unique constraint refusing a row: in either engine.
pub(crate) fn is_unique_violation(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        if let Some(pg) = cause.downcast_ref::<PgError>() {
            return pg.code.as_deref() == Some("23505");
        }
        matches!(
            cause.downcast_ref::<rusqlite::Error>(),
            Some(rusqlite::Error::SqliteFailure(f, _))
                if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
        )
    })
}

/// A query's rows from SQLite, its statement prepared once per connection, read by `read`.
fn sqlite_rows<T>(
    conn: &rusqlite::Connection,
    sql: &str,
    params: &[&dyn ToParam],
    read: impl FnOnce(&mut rusqlite::Rows<'_>) -> Result<T>,
) -> Result<T> {
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(rusqlite::params_from_iter(
        params.iter().map(|p| p.to_param()),
    ))?;
    read(&mut rows)
}

/// Tells a statement and the rows it returned (or changed), under
/// `OWL_LOG=owl::sql=debug`: how a command's queries grow with the state is seen, and the
/// tests bound them. Costs one check of the filter when it is off.
fn trace(sql: &str, rows: usize) {
    if tracing::enabled!(target: "owl::sql", tracing::Level::DEBUG) {
        let sql = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        tracing::debug!(target: "owl::sql", rows, "sql: {sql}");
    }
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

/// How many prepared statements a connection keeps: every statement the store has, so a
/// tick prepares each once.
const STATEMENT_CACHE: usize = 96;

impl Db {
    pub(super) fn sqlite(conn: rusqlite::Connection) -> Db {
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Db::Sqlite(conn)
    }

    pub(super) fn postgres(
        connected: super::postgres::Connected,
        url: super::postgres::PgUrl,
    ) -> Db {
        Db::Postgres(Box::new(std::cell::RefCell::new(Pg::new(connected, url))))
    }

    /// How long one statement may wait for another's lock: SQLite's busy timeout, or
    /// PostgreSQL's `lock_timeout` (and the bounds that follow from it).
    pub(super) fn wait_at_most(&self, timeout: std::time::Duration) -> Result<()> {
        match self {
            Db::Sqlite(conn) => Ok(conn.busy_timeout(timeout)?),
            Db::Postgres(pg) => {
                pg.borrow_mut().set_lock_wait(timeout);
                Ok(())
            }
        }
    }

    /// Whether this is PostgreSQL: for the few statements its dialect says otherwise.
    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// How the connection to PostgreSQL reached the server; `None` for SQLite.
    pub(super) fn reach(&self) -> Option<super::postgres::Reach> {
        match self {
            Db::Sqlite(_) => None,
            Db::Postgres(pg) => Some(pg.borrow().reach.clone()),
        }
    }

    /// The SQLite connection, for what only SQLite has (pragmas, its file).
    pub(super) fn sqlite_conn(&self) -> Option<&rusqlite::Connection> {
        match self {
            Db::Sqlite(conn) => Some(conn),
            Db::Postgres(_) => None,
        }
    }

    /// Runs a statement; how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[&dyn ToParam]) -> Result<usize> {
        let changed = match self {
            Db::Sqlite(conn) => {
                let mut stmt = conn.prepare_cached(sql)?;
                stmt.execute(rusqlite::params_from_iter(
                    params.iter().map(|p| p.to_param()),
                ))?
            }
            Db::Postgres(pg) => pg.borrow_mut().execute(sql, params)?,
        };
        trace(sql, changed);
        Ok(changed)
    }

    /// Calls `each` with every row of a query, in order.
    pub(crate) fn for_each(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        mut each: impl FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut n = 0;
        match self {
            Db::Sqlite(conn) => sqlite_rows(conn, sql, params, |rows| {
                while let Some(r) = rows.next()? {
                    n += 1;
                    each(&Row::Sqlite(r))?;
                }
                Ok(())
            })?,
            Db::Postgres(pg) => {
                let rows = pg.borrow_mut().query(sql, params)?;
                for r in &rows {
                    n += 1;
                    each(&Row::Postgres(r))?;
                }
            }
        }
        trace(sql, n);
        Ok(())
    }

    /// Every row of a query, each read by `f`.
    pub(crate) fn query_map<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.for_each(sql, params, |r| {
            out.push(f(r)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row of a query read by `f`, or `None` when there is none.
    pub(crate) fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let found = match self {
            Db::Sqlite(conn) => sqlite_rows(conn, sql, params, |rows| match rows.next()? {
                Some(r) => f(&Row::Sqlite(r)).map(Some),
                None => Ok(None),
            }),
            Db::Postgres(pg) => {
                let rows = pg.borrow_mut().query(sql, params)?;
                rows.first().map(|r| f(&Row::Postgres(r))).transpose()
            }
        }?;
        trace(sql, usize::from(found.is_some()));
        Ok(found)
    }

    /// The first row of a query read by `f`; an error when there is none.
    pub(crate) fn query_one<T>(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.query_opt(sql, params, f)?
            .with_context(|| format!("no row from: {sql}"))
    }

    /// Whether a query has any row.
    pub(crate) fn exists(&self, sql: &str, params: &[&dyn ToParam]) -> Result<bool> {
        Ok(self.query_opt(sql, params, |_| Ok(()))?.is_some())
    }

    /// Runs statements that take no parameters and return nothing.
    pub(crate) fn execute_batch(&self, sql: &str) -> Result<()> {
        match self {
            Db::Sqlite(conn) => conn.execute_batch(sql)?,
            Db::Postgres(pg) => pg.borrow_mut().batch(sql)?,
        }
        trace(sql, 0);
        Ok(())
    }

    /// Runs `f` in one transaction, committed when `f` succeeds and rolled back when it
    /// fails. SQLite's takes the write lock up front, so a concurrent writer waits on the
    /// busy timeout instead of failing mid-transaction; PostgreSQL's locks rows as it
    /// writes them.
    /// Inside a transaction already (`Store::write_all`), `f` is part of it, committed or
    /// rolled back with it.
    pub(crate) fn transaction<T>(&mut self, f: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        if self.in_transaction() {
            return f(self);
        }
        self.begin()?;
        let done = f(self);
        self.end(done)
    }

    /// Starts a write transaction.
    pub(super) fn begin(&self) -> Result<()> {
        let begin = match self {
            Db::Sqlite(_) => "BEGIN IMMEDIATE",
            Db::Postgres(_) => "BEGIN",
        };
        self.execute_batch(begin)
            .context("starting a write transaction")
    }

    /// Ends the transaction [`Db::begin`] started: committed when `done` is a success,
    /// rolled back when it (or the commit) failed.
    pub(super) fn end<T>(&self, done: Result<T>) -> Result<T> {
        let done = done.and_then(|out| {
            self.execute_batch("COMMIT")
                .context("committing a write transaction")?;
            Ok(out)
        });
        if done.is_err() && self.in_transaction() {
            let _ = self.execute_batch("ROLLBACK");
        }
        done
    }

    /// Whether a transaction is open on the connection.
    pub(super) fn in_transaction(&self) -> bool {
        match self {
            Db::Sqlite(conn) => !conn.is_autocommit(),
            Db::Postgres(pg) => pg.borrow().in_transaction,
        }
    }
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
