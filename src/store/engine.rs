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

/// One row of a result, as the engine gave it.
pub(crate) struct Row<'r>(&'r rusqlite::Row<'r>);

impl<'r> Row<'r> {
    /// Column `i` as `T`.
    pub(crate) fn get<T: Column>(&self, i: usize) -> Result<T> {
        T::from_sqlite(self.0, i).with_context(|| format!("reading column {i}"))
    }

    /// Column `i`'s text, borrowed from the row.
    pub(crate) fn text(&self, i: usize) -> Result<&'r str> {
        Ok(self.0.get_ref(i)?.as_str()?)
    }

    /// Column `i`'s text, borrowed from the row, or `None` when it is NULL.
    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<&'r str>> {
        Ok(self.0.get_ref(i)?.as_str_or_null()?)
    }
}

/// What a column can be read as.
pub(crate) trait Column: Sized {
    fn from_sqlite(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self>;
}

macro_rules! column {
    ($($t:ty),*) => {$(
        impl Column for $t {
            fn from_sqlite(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
                row.get(i)
            }
        }
    )*};
}
column!(i64, i32, u32, u64, f64, bool, String);

impl<T: Column> Column for Option<T> {
    fn from_sqlite(row: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Self> {
        match row.get_ref(i)? {
            rusqlite::types::ValueRef::Null => Ok(None),
            _ => T::from_sqlite(row, i).map(Some),
        }
    }
}

/// An open connection: every statement of the store goes through here.
pub(crate) struct Db {
    pub(super) conn: rusqlite::Connection,
}

/// How many prepared statements a connection keeps: every statement the store has, so a
/// tick prepares each once.
const STATEMENT_CACHE: usize = 96;

impl Db {
    pub(super) fn sqlite(conn: rusqlite::Connection) -> Db {
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Db { conn }
    }

    /// Runs a statement; how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[&dyn ToParam]) -> Result<usize> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        Ok(stmt.execute(rusqlite::params_from_iter(
            params.iter().map(|p| p.to_param()),
        ))?)
    }

    /// Calls `each` with every row of a query, in order.
    pub(crate) fn for_each(
        &self,
        sql: &str,
        params: &[&dyn ToParam],
        mut each: impl FnMut(&Row<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(
            params.iter().map(|p| p.to_param()),
        ))?;
        while let Some(r) = rows.next()? {
            each(&Row(r))?;
        }
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
        let mut stmt = self.conn.prepare_cached(sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(
            params.iter().map(|p| p.to_param()),
        ))?;
        match rows.next()? {
            Some(r) => f(&Row(r)).map(Some),
            None => Ok(None),
        }
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

    /// Runs `f` in one transaction that takes the write lock up front, so a concurrent
    /// writer waits on the busy timeout instead of failing mid-transaction; committed when
    /// `f` succeeds, rolled back when it fails.
    pub(crate) fn transaction<T>(&mut self, f: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .context("starting a write transaction")?;
        let done = f(self).and_then(|out| {
            self.conn
                .execute_batch("COMMIT")
                .context("committing a write transaction")?;
            Ok(out)
        });
        if done.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        done
    }
}
