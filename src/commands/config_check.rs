//! `owl config check`: the config validated and printed resolved (credentials hidden).

use anyhow::Result;

use super::Ctx;

pub(super) fn run(ctx: &Ctx) -> Result<u8> {
    outln!("# owl config: valid, read from {}", ctx.config.source);
    crate::output::write_out(format_args!("{}", serde_yaml::to_string(&ctx.config)?));
    Ok(0)
}
