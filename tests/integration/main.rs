//! owl's integration tests: the real binary, real git repositories, a real SQLite file,
//! and a fake agent replaying transcripts recorded from the real Claude Code CLI.

mod architecture;
mod bad_input;
mod ceilings;
mod chains;
mod codex;
mod commands;
mod conformance;
mod continuity;
mod e2e;
mod faults;
mod first_night;
mod first_week;
mod fixture_shapes;
mod fresh_home;
mod gemini;
mod history;
mod hostile;
mod json_contract;
mod machines;
mod morning;
mod night;
mod notify;
mod output;
mod report;
mod sandbox;
mod several;
mod shell;
mod snapshots;
mod support;
mod three_drivers;
mod tick_basics;
mod tick_job;
mod trust;
mod usage_windows;
mod verified;
