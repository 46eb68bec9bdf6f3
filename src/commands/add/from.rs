//! `owl add --from FILE`: a plan of Jobs queued in one step, all or none; each entry checked as `owl add` checks its flags, a refusal naming the file, the line and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::Deserialize;

use super::{build, fresh_id, Asked, AskedCheck, Batch, Spelling};
use crate::bad_input;
use crate::commands::Ctx;
use crate::model::NewJob;

/// The most entries a plan file may hold: a night's queue, not a data set.
const MAX_ENTRIES: usize = 1_000;
/// The largest plan file read.
const MAX_BYTES: u64 = 4 * 1024 * 1024;

/// One entry of a plan file: every field `owl add` takes, spelled as in config.yaml.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Entry {
    prompt: Option<String>,
    prompt_file: Option<PathBuf>,
    name: Option<String>,
    /// Relative to the file's directory; default: that directory.
    repo: Option<PathBuf>,
    base: Option<String>,
    account: Option<String>,
    priority: Option<i64>,
    max_runs: Option<u32>,
    max_budget_usd: Option<f64>,
    max_job_budget_usd: Option<f64>,
    /// A command line (split as a shell would) or argv.
    check: Option<CheckField>,
    #[serde(default)]
    no_check: bool,
    /// Jobs of this file (by name) or already queued (by id or name).
    #[serde(default)]
    after: Vec<String>,
    /// Another machine sharing the store to run it on; its `repo` is then that machine's
    /// absolute path.
    machine: Option<String>,
    /// More hosts its sandboxed Runs may reach.
    #[serde(default)]
    allow_hosts: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum CheckField {
    Line(String),
    Argv(Vec<String>),
}

/// An entry with where it stands: its own line and each of its keys'.
struct Placed {
    entry: Entry,
    line: usize,
    keys: BTreeMap<String, usize>,
}

impl Placed {
    /// The line of `key` in this entry, else the entry's.
    fn line_of(&self, key: &str) -> usize {
        self.keys.get(key).copied().unwrap_or(self.line)
    }
}

pub(super) fn run(ctx: &Ctx, file: &Path) -> Result<u8> {
    let shown = file.display().to_string();
    let placed = read(file)?;
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let order = in_dependency_order(&placed, &shown)?;
    let known = ctx.read_store()?;
    let mut jobs: Vec<(usize, NewJob)> = Vec::new();
    for i in order {
        let p = &placed[i];
        let asked = asked_of(&p.entry, &dir).map_err(|(key, why)| {
            crate::error::Error::bad_input(format!(
                "{shown}: line {}: {key}: {why}; nothing was queued",
                p.line_of(key)
            ))
        })?;
        let earlier: Vec<NewJob> = jobs.iter().map(|(_, j)| j.clone()).collect();
        let batch = Batch {
            store: known.as_ref(),
            earlier: &earlier,
        };
        match build(ctx, asked, &batch, Spelling::Keys)? {
            Ok(job) => jobs.push((i, job)),
            Err(refused) => bad_input!(
                "{shown}: line {}: {}; nothing was queued",
                p.line_of(refused.key),
                refused.why
            ),
        }
    }
    drop(known);
    let mut store = ctx.open_store()?;
    jobs.sort_by_key(|(i, _)| *i);
    let mut ready: Vec<NewJob> = Vec::new();
    for (_, mut job) in jobs {
        if job.id.is_empty() {
            job.id = fresh_id(&store, &ready)?;
        }
        ready.push(job);
    }
    store.insert_jobs(&ready, crate::clock::now()?)?;
    for job in &ready {
        outln!("{}", job.id);
    }
    Ok(crate::error::EXIT_OK)
}

/// What an entry asks for, its paths taken from the file's directory; the key at fault and
/// why, when it asks for nothing that can run.
fn asked_of(entry: &Entry, dir: &Path) -> Result<Asked, (&'static str, String)> {
    let prompt = match (&entry.prompt, &entry.prompt_file) {
        (Some(_), Some(_)) => {
            return Err(("promptFile", "give prompt or promptFile, not both".into()))
        }
        (Some(p), None) => p.clone(),
        (None, Some(file)) => super::read_prompt_file(&dir.join(file))
            .map_err(|why| ("promptFile", why.to_string()))?,
        (None, None) => return Err(("prompt", "an entry needs a prompt (or promptFile)".into())),
    };
    if prompt.trim().is_empty() {
        return Err(("prompt", "the prompt is empty".into()));
    }
    let check = match (&entry.check, entry.no_check) {
        (Some(_), true) => return Err(("noCheck", "give check or noCheck, not both".into())),
        (_, true) => AskedCheck::Off,
        (Some(CheckField::Line(line)), false) => AskedCheck::Line(line.clone()),
        (Some(CheckField::Argv(argv)), false) => AskedCheck::Argv(argv.clone()),
        (None, false) => AskedCheck::Default,
    };
    if entry.machine.is_some() && !entry.repo.as_deref().is_some_and(Path::is_absolute) {
        return Err((
            "machine",
            "an entry for another machine needs repo: the repository's absolute path there".into(),
        ));
    }
    Ok(Asked {
        prompt,
        repo: dir.join(entry.repo.as_deref().unwrap_or(Path::new("."))),
        base: entry.base.clone(),
        account: entry.account.clone(),
        priority: entry.priority,
        max_runs: entry.max_runs,
        max_budget_usd: entry.max_budget_usd,
        max_job_budget_usd: entry.max_job_budget_usd,
        name: entry.name.clone(),
        check,
        after: entry.after.clone(),
        machine: entry.machine.clone(),
        allow_hosts: entry.allow_hosts.clone(),
    })
}

/// The entries' indexes so that each comes after the entries of this file it waits for;
/// a cycle is refused with the line of the entry that closes it.
fn in_dependency_order(placed: &[Placed], shown: &str) -> Result<Vec<usize>> {
    let by_name: BTreeMap<&str, usize> = placed
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.entry.name.as_deref().map(|n| (n, i)))
        .collect();
    let mut order = Vec::new();
    // 0: not yet, 1: being placed, 2: placed.
    let mut mark = vec![0u8; placed.len()];
    fn visit(
        i: usize,
        placed: &[Placed],
        by_name: &BTreeMap<&str, usize>,
        mark: &mut [u8],
        order: &mut Vec<usize>,
        path: &mut Vec<usize>,
    ) -> Result<(), Vec<usize>> {
        match mark[i] {
            2 => return Ok(()),
            1 => {
                path.push(i);
                return Err(path.clone());
            }
            _ => {}
        }
        mark[i] = 1;
        path.push(i);
        for after in &placed[i].entry.after {
            if let Some(&j) = by_name.get(after.as_str()) {
                visit(j, placed, by_name, mark, order, path)?;
            }
        }
        path.pop();
        mark[i] = 2;
        order.push(i);
        Ok(())
    }
    for i in 0..placed.len() {
        let mut path = Vec::new();
        if let Err(cycle) = visit(i, placed, &by_name, &mut mark, &mut order, &mut path) {
            let names: Vec<&str> = cycle
                .iter()
                .map(|&k| placed[k].entry.name.as_deref().unwrap_or("?"))
                .collect();
            let last = *cycle.last().unwrap_or(&i);
            bad_input!(
                "{shown}: line {}: after: a cycle ({}): no Job of it could ever run; nothing \
                 was queued",
                placed[last].line_of("after"),
                names.join(" → ")
            );
        }
    }
    Ok(order)
}

/// The entries of a plan file: YAML (a list), or JSON Lines for a `.jsonl` file.
fn read(file: &Path) -> Result<Vec<Placed>> {
    let shown = file.display();
    // A regular file, bounded: a FIFO or /dev/zero named here is refused at once.
    let bytes = crate::untrusted::read_named(file, MAX_BYTES).map_err(|e| match e {
        crate::untrusted::Refused::TooLarge { .. } => crate::error::Error::bad_input(format!(
            "{shown} is over the {MAX_BYTES} bytes a plan file may hold"
        )),
        e => crate::error::Error::bad_input(format!("reading the plan: {e}")),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        crate::error::Error::bad_input(format!(
            "{shown} is not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let placed = match file.extension().and_then(|e| e.to_str()) {
        Some("jsonl") => read_json_lines(&text, &shown.to_string())?,
        _ => read_yaml(&text, &shown.to_string())?,
    };
    if placed.is_empty() {
        bad_input!("{shown} holds no Job");
    }
    if placed.len() > MAX_ENTRIES {
        bad_input!(
            "{shown} holds {} Jobs, over the {MAX_ENTRIES} one file may",
            placed.len()
        );
    }
    Ok(placed)
}

/// One JSON object a line; blank lines are skipped.
fn read_json_lines(text: &str, shown: &str) -> Result<Vec<Placed>> {
    let mut placed = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let entry: Entry = serde_json::from_str(line).map_err(|e| {
            let said = strip_at(&e.to_string());
            let said = crate::config::explain_unknown_key(&said).unwrap_or(said);
            crate::error::Error::bad_input(format!("{shown}: line {}: {said}", n + 1))
        })?;
        placed.push(Placed {
            entry,
            line: n + 1,
            keys: BTreeMap::new(),
        });
    }
    Ok(placed)
}

/// A YAML list of entries, each key's line from the parser's own marks.
fn read_yaml(text: &str, shown: &str) -> Result<Vec<Placed>> {
    let positions = crate::config::Positions::read(text).map_err(|e| {
        let said = crate::config::explain_structure(text, &e);
        crate::error::Error::bad_input(format!("{shown}: {said}"))
    })?;
    let entries: Vec<Entry> = serde_yaml::from_str(text).map_err(|e| {
        let said = crate::config::explain_yaml_error(&positions, &e);
        crate::error::Error::bad_input(format!("{shown}: {said}"))
    })?;
    Ok(entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            let line = positions.value_line(&format!("[{i}]")).unwrap_or(1);
            let keys = positions.keys_under(&format!("[{i}]"));
            Placed { entry, line, keys }
        })
        .collect())
}

/// An error's words without the position serde appends (the line is said first).
fn strip_at(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}
