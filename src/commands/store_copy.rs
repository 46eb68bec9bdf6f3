//! `owl store copy --to URL`: this machine's SQLite state moved into an empty PostgreSQL store, for machines to share.

use anyhow::Result;

use super::Ctx;
use crate::store::Store;

/// What `owl store copy` was asked.
#[derive(Debug, clap::Args)]
pub(crate) struct StoreCopyArgs {
    /// The PostgreSQL store to copy into (postgres://ROLE@HOST/DB, the password from
    /// PGPASSWORD or ~/.pgpass, never in the URL). It must be empty.
    #[arg(long, value_name = "URL")]
    to: String,
}

pub(super) fn copy(ctx: &Ctx, args: &StoreCopyArgs) -> Result<u8> {
    let url = crate::config::PgUrl::parse(&args.to)
        .map_err(|why| crate::error::Error::bad_input(format!("--to: {why}")))?;
    let Some(from) = Store::open_existing(&ctx.config.state().db())? else {
        crate::bad_input!(
            "there is no state to copy: {} does not exist",
            ctx.config.state().db().display()
        );
    };
    let mut to = Store::open_postgres(&url)?;
    let counts = match from.copy_into(&mut to, &ctx.config.machine) {
        Err(e) if e.downcast_ref::<crate::store::NotEmpty>().is_some() => {
            return Err(crate::error::Error::bad_input(e.to_string()).into())
        }
        other => other?,
    };
    let said: Vec<String> = counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(table, n)| format!("{n} {table}"))
        .collect();
    outln!(
        "copied {} into {url}, the rows named for machine {}: {}",
        from.location(),
        ctx.config.machine,
        if said.is_empty() {
            "nothing (it was empty)".into()
        } else {
            said.join(", ")
        }
    );
    // The URL as given: its TLS settings go on with it (it holds no password: refused).
    let given = args.to.trim();
    outln!("next: set `store: {given}` in this machine's config (and each other machine's)");
    Ok(0)
}
