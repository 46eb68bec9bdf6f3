//! The SQL engine under the store: a statement, its parameters and its rows in one small interface, so that what owl asks of its state is written once.
//!
//! Statements are written in the SQL both engines speak (`?N` parameters, `ON CONFLICT`,
//! `RETURNING`, quoted `"window"`); an engine translates what it must. A row's text is
//! borrowed from the engine's own row, never copied, so a listing of ten thousand Jobs
//! costs what the engine costs.

use anyhow::{Context, Result};

use super::pg_conn::{Pg, PgError};

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
pub(super) fn trace(sql: &str, rows: usize) {
    if tracing::enabled!(target: "owl::sql", tracing::Level::DEBUG) {
        let sql = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        tracing::debug!(target: "owl::sql", rows, "sql: {sql}");
    }
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
            Db::Sqlite(conn) => {
                conn.execute_batch(sql)?;
                trace(sql, 0);
            }
            // Traced as sent: a `BEGIN` goes with the transaction's first statement.
            Db::Postgres(pg) => pg.borrow_mut().batch(sql)?,
        }
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
