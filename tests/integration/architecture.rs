//! The module ladder of docs/architecture.md, checked against every import in `src/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const FORBIDDEN: &[(&str, &str)] = &[
    ("schedule", "store"),
    ("schedule", "supervise"),
    ("driver", "store"),
    ("model", "commands"),
    ("supervise", "commands"),
];

/// What a policy module must not do: read the clock, start a process, touch a file.
const IMPURE: &[&str] = &[
    "clock::now",
    "Utc::now",
    "Instant::now",
    "SystemTime::now",
    "process::Command",
    "std::fs",
];

/// The rungs of the ladder, read from the doc's table: module name -> rung.
fn ladder(doc: &str) -> BTreeMap<String, usize> {
    let mut rungs = BTreeMap::new();
    let mut rung = 0;
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| 0 base | `error`, `text` | ... |`: a rung row starts with its number.
        let Some(first) = cells.get(1) else { continue };
        if !first.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        for module in cells[2].split(',') {
            rungs.insert(module.trim().trim_matches('`').to_string(), rung);
        }
        rung += 1;
    }
    rungs
}

/// The module a source file belongs to: `commands::tick` for src/commands/tick.rs and its
/// submodules, the top-level module otherwise.
fn module_of(relative: &Path) -> String {
    let parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|p| p != "mod")
        .collect();
    match parts.as_slice() {
        [first, second, ..] if first == "commands" => format!("commands::{second}"),
        [first, ..] => first.clone(),
        [] => String::new(),
    }
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

/// The code of a file as compiled outside tests: comments and the `#[cfg(test)] mod tests`
/// (always last in owl's files) left out.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module each module uses: `crate::x` paths, `super::x` between commands, and the
/// crate-level macros by the module that defines them.
fn imports(files: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in files {
        let used = out.entry(module.clone()).or_default();
        let code = code(text);
        for (at, _) in code.match_indices("crate::") {
            let name: String = code[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let name = match name.as_str() {
                "bad_input" => "error".to_string(),
                _ => name,
            };
            if !name.is_empty() && name != top(module) {
                used.insert(name);
            }
        }
        if module.starts_with("commands::") {
            for (at, _) in code.match_indices("super::") {
                let name: String = code[at + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let sibling = format!("commands::{name}");
                if files.contains_key(&sibling) && &sibling != module {
                    used.insert(sibling);
                }
            }
        }
        let prints = code.contains("outln!(") || code.contains("errln!(");
        if prints && top(module) != "output" {
            used.insert("output".into());
        }
    }
    out
}

/// Every rule the code breaks, in words.
fn violations(files: &BTreeMap<String, String>, rungs: &BTreeMap<String, usize>) -> Vec<String> {
    let graph = imports(files);
    let mut broken = Vec::new();
    for (module, used) in &graph {
        let Some(&own) = rungs.get(top(module)) else {
            broken.push(format!("{module} is on no rung of docs/architecture.md"));
            continue;
        };
        for dep in used {
            match rungs.get(top(dep)) {
                None => broken.push(format!("{module} uses {dep}, which is on no rung")),
                Some(&theirs) if theirs > own => broken.push(format!(
                    "{module} (rung {own}) uses {dep} (rung {theirs}), a rung above it"
                )),
                _ => {}
            }
            if FORBIDDEN.contains(&(top(module), top(dep))) {
                broken.push(format!("{module} uses {dep}: forbidden outright"));
            }
        }
        if rungs.get(top(module)) == Some(&3) {
            let code = code(&files[module]);
            for word in IMPURE {
                if code.contains(word) {
                    broken.push(format!("{module} is policy but uses {word}"));
                }
            }
        }
        if top(module) != "sys" && code(&files[module]).contains("unsafe") {
            broken.push(format!("{module} has unsafe code outside sys"));
        }
    }
    broken.extend(cycles(&graph));
    broken
}

/// A cycle among the modules as a sentence, for each one found.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    // Top-level modules and the commands, each a node; a command's use of a top-level
    // module is an edge to that module.
    let node = |m: &str| -> String {
        if m.starts_with("commands::") || graph.contains_key(m) {
            m.to_string()
        } else {
            top(m).to_string()
        }
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, used) in graph {
        let from = if from.starts_with("commands::") {
            from.clone()
        } else {
            top(from).to_string()
        };
        for to in used {
            let to = node(to);
            if to != from {
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    // Each cycle once, however many of its modules it was found from.
    let mut found: BTreeMap<BTreeSet<String>, String> = BTreeMap::new();
    for start in edges.keys() {
        // A path from a neighbour back to `start` is a cycle through it.
        let mut stack: Vec<Vec<String>> = vec![vec![start.clone()]];
        let mut seen = BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = path.last().unwrap();
            for next in edges.get(last).into_iter().flatten() {
                if next == start {
                    let members: BTreeSet<String> = path.iter().cloned().collect();
                    let mut cycle = path.clone();
                    cycle.push(start.clone());
                    found
                        .entry(members)
                        .or_insert_with(|| format!("a cycle: {}", cycle.join(" -> ")));
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
    found.into_values().collect()
}

/// Every `*.rs` file below `root`.
fn rust_files(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// Each `src/**/*.rs` file's code (see [`code`]) by its path under `src/`.
fn source_files() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    rust_files(&root)
        .into_iter()
        .map(|path| {
            let relative = path.strip_prefix(&root).unwrap().display().to_string();
            (relative, code(&std::fs::read_to_string(&path).unwrap()))
        })
        .collect()
}

/// `src/**/*.rs` by module, each module's files' code joined (the test modules in files of
/// their own, `tests.rs`, left out).
fn sources() -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (relative, code) in source_files() {
        let module = module_of(Path::new(&relative));
        if module == "lib" || module == "main" || relative.ends_with("tests.rs") {
            continue;
        }
        let joined = out.entry(module).or_default();
        joined.push_str(&code);
        joined.push('\n');
    }
    out
}

fn doc_ladder() -> BTreeMap<String, usize> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    ladder(&doc)
}

#[test]
fn every_import_in_src_keeps_to_the_ladder_of_docs_architecture() {
    let rungs = doc_ladder();
    assert!(rungs.len() >= 20, "the doc's table was not read: {rungs:?}");
    let files = sources();
    // Every top-level module in src is on a rung, and every rung names a real module.
    for module in files.keys() {
        assert!(rungs.contains_key(top(module)), "{module} is on no rung");
    }
    for module in rungs.keys() {
        assert!(
            files.keys().any(|m| top(m) == module),
            "the doc names {module}, which src/ does not have"
        );
    }
    let broken = violations(&files, &rungs);
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// What the checker says of `src/` with `code` added at the top of `module` (at the top:
/// what follows `#[cfg(test)]` is a test's).
fn broken_with(module: &str, code: &str) -> Vec<String> {
    let mut files = sources();
    files.get_mut(module).unwrap().insert_str(0, code);
    violations(&files, &doc_ladder())
}

#[test]
fn a_forbidden_import_or_a_cycle_is_caught() {
    let broken = broken_with("schedule", "use crate::store::Store;\n");
    assert!(
        broken.contains(&"schedule uses store: forbidden outright".to_string()),
        "{broken:?}"
    );
    assert!(
        broken.iter().any(|b| b.contains("a rung above it")),
        "{broken:?}"
    );

    let broken = broken_with("commands::plan", "fn f() { super::tick::run(); }\n");
    assert!(
        broken
            .iter()
            .any(|b| b.starts_with("a cycle:") && b.contains("commands::plan")),
        "{broken:?}"
    );

    let broken = broken_with(
        "outcome",
        "fn f() { let _ = chrono::Utc::now(); unsafe {} }\n",
    );
    for expected in [
        "outcome is policy but uses Utc::now",
        "outcome has unsafe code outside sys",
    ] {
        assert!(broken.contains(&expected.to_string()), "{broken:?}");
    }
}

#[test]
fn comments_and_tests_are_not_imports() {
    let mut files = BTreeMap::new();
    files.insert(
        "schedule".to_string(),
        "// see crate::store::Store\nfn a() {}\n#[cfg(test)]\nmod tests { use crate::store::Store; }\n"
            .to_string(),
    );
    assert!(imports(&files)["schedule"].is_empty());
}

/// Issue 24: what only tests use is not installed: every binary but `owl` needs the
/// `test-doubles` feature, which no default turns on (the dev-dependency on owl itself
/// turns it on for tests and benches), so `cargo install --path .` installs `owl` alone.
#[test]
fn test_doubles_are_not_installed() {
    let manifest =
        std::fs::read_to_string(format!("{}/Cargo.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let bins: Vec<&str> = manifest.split("\n[[bin]]\n").skip(1).collect();
    assert!(bins.len() >= 2, "{manifest}");
    for bin in bins {
        let section = bin.split("\n[").next().unwrap();
        if section.contains("name = \"owl\"\n") {
            assert!(!section.contains("required-features"), "{section}");
        } else {
            assert!(
                section.contains("required-features = [\"test-doubles\"]"),
                "a binary installed with owl: {section}"
            );
        }
    }
    let features = manifest
        .split("[features]")
        .nth(1)
        .and_then(|f| f.split("\n[").next())
        .unwrap_or_default();
    assert!(!features.contains("default"), "{features}");
}

/// The words a state is rendered in, compared as strings: a CLI's rate-limit word, a tick's
/// action, a Job's state. Outside a Driver (which reads the CLI's words once) none may be.
const STATE_WORDS: [&str; 11] = [
    "rejected",
    "allowed",
    "allowed_warning",
    "busy",
    "idle",
    "ran",
    "done",
    "blocked",
    "failed",
    "queued",
    "waiting",
];

/// The comparisons of `code` with a state's words (`== "rejected"`, `"done" =>`,
/// `.starts_with("busy")`).
fn word_comparisons(code: &str) -> Vec<String> {
    code.lines()
        .filter(|line| {
            STATE_WORDS.iter().any(|w| {
                let quoted = format!("\"{w}\"");
                line.contains(&format!("== {quoted}"))
                    || line.contains(&format!("!= {quoted}"))
                    || line.trim_start().starts_with(&format!("{quoted} =>"))
                    || ["starts_with", "ends_with", "contains"]
                        .iter()
                        .any(|f| line.contains(&format!(".{f}(\"{w}")))
            })
        })
        .map(|l| l.trim().to_string())
        .collect()
}

/// Issue 24: states are types. No code decides by comparing a state's words but the
/// parsers that turn words into types once: a Driver (the CLI's words) and `handoff` (the
/// Handoff file's); the words are rendered from the type in one place.
#[test]
fn no_code_outside_a_driver_compares_a_states_words() {
    let found: Vec<String> = sources()
        .into_iter()
        .filter(|(module, _)| !["driver", "handoff"].contains(&top(module)))
        .flat_map(|(module, text)| {
            word_comparisons(&code(&text))
                .into_iter()
                .map(move |l| format!("{module}: {l}"))
        })
        .collect();
    assert!(found.is_empty(), "{found:#?}");
    // The check itself catches what it is for.
    assert_eq!(
        word_comparisons("if info.status == \"rejected\" {\n    \"done\" => x,\n"),
        ["if info.status == \"rejected\" {", "\"done\" => x,"]
    );
    // A rendered reason searched for its first word (what the tick's busy test once did).
    assert_eq!(
        word_comparisons(".filter(|(_, why)| why.starts_with(\"busy\"))"),
        [".filter(|(_, why)| why.starts_with(\"busy\"))"]
    );
}

/// The places `code` decides by a Window's name rather than its kind (`model::WindowKind`).
fn window_name_tests(code: &str) -> Vec<String> {
    code.lines()
        .filter(|line| {
            ["five_hour", "seven_day"].iter().any(|w| {
                line.contains(&format!("starts_with(\"{w}"))
                    || line.contains(&format!("== \"{w}"))
                    || line.trim_start().starts_with(&format!("\"{w}\" =>"))
            })
        })
        .map(|l| l.trim().to_string())
        .collect()
}

/// A Window is read once, into its kind (`WindowKind::of`, in `model`), from the name the
/// Driver passed on: nothing else tells a weekly Window from a five-hour one by its name.
#[test]
fn only_the_window_kind_reads_a_windows_name() {
    let found: Vec<String> = sources()
        .into_iter()
        // The conformance check holds the CLI to the very names it writes.
        .filter(|(module, _)| !["driver", "model", "conformance"].contains(&top(module)))
        .flat_map(|(module, text)| {
            window_name_tests(&code(&text))
                .into_iter()
                .map(move |l| format!("{module}: {l}"))
        })
        .collect();
    assert!(found.is_empty(), "{found:#?}");
    // It would have caught this morning's schedule, which read a Window's length off its name.
    assert_eq!(
        window_name_tests("    if window.starts_with(\"seven_day\") {\n"),
        ["if window.starts_with(\"seven_day\") {"]
    );
}

/// Where code names a particular Executor (`ExecutorKind`, `SandboxExecutor`) or runs one's
/// own check outside the Executor seam itself (`supervise`), the config that reads the
/// choice, and `doctor`, whose words to the user are about each Executor.
fn executor_knowledge(files: &BTreeMap<String, String>) -> Vec<String> {
    files
        .iter()
        .filter(|(module, _)| {
            // The store records which one ran a Run, by its kind, and knows nothing of it;
            // the conformance check wraps the local one for scenarios side by side.
            ![
                "supervise",
                "config",
                "store",
                "conformance",
                "commands::doctor",
            ]
            .iter()
            .any(|seam| module.starts_with(seam))
        })
        .flat_map(|(module, text)| {
            let code = code(text);
            ["ExecutorKind", "SandboxExecutor", "sandbox::check"]
                .into_iter()
                .filter(|word| code.contains(word))
                .map(|word| format!("{module} names {word}"))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_tick_and_the_commands_never_know_which_executor_runs() {
    let found = executor_knowledge(&sources());
    assert!(found.is_empty(), "{found:#?}");
    // It would have caught this morning's tick, which chose and checked bubblewrap itself.
    let mut broken = BTreeMap::new();
    broken.insert(
        "commands::tick".to_string(),
        "let sandboxed = account_cfg.executor == ExecutorKind::Sandbox;".to_string(),
    );
    assert_eq!(
        executor_knowledge(&broken),
        ["commands::tick names ExecutorKind"]
    );
}

/// Where code outside a Driver's own files names that Driver (its `DriverKind` variant or
/// its type), besides the registry lines that must: its row in `config`'s table, its line
/// in `driver::for_kind` and its line in `conformance::check`. `files` is code by path under `src/`.
fn driver_knowledge(files: &BTreeMap<String, String>) -> Vec<String> {
    let drivers = [
        ("claude_code", "ClaudeCode", "DriverKind::ClaudeCode"),
        ("gemini", "GeminiCli", "DriverKind::Gemini"),
        ("codex", "Codex", "DriverKind::Codex"),
    ];
    let mut found = Vec::new();
    for (path, code) in files {
        if path.ends_with("tests.rs") {
            continue;
        }
        for (own, type_name, variant) in drivers {
            let own_files = [format!("driver/{own}.rs"), format!("conformance/{own}.rs")];
            let own_dirs = [format!("driver/{own}/"), format!("conformance/{own}/")];
            if own_files.contains(path) || own_dirs.iter().any(|d| path.starts_with(d.as_str())) {
                continue;
            }
            let naming = [
                format!("{type_name}::"),
                format!("{type_name})"),
                format!("{type_name},"),
            ];
            let lines = code
                .lines()
                .filter(|l| l.contains(variant) || naming.iter().any(|n| l.contains(n.as_str())))
                .count();
            // config: the enum's variant and the table's row; driver and conformance: the
            // registry line.
            let allowed = match path.as_str() {
                "config/drivers.rs" => 2,
                "driver/mod.rs" | "conformance/mod.rs" => 1,
                _ => 0,
            };
            if lines > allowed {
                found.push(format!("{path} names the {own} Driver on {lines} lines"));
            }
        }
    }
    found
}

#[test]
fn a_new_driver_is_its_file_and_a_line_in_each_registry() {
    let found = driver_knowledge(&source_files());
    assert!(found.is_empty(), "{found:#?}");
    // It would have caught this morning's config, with a field per Driver in `Drivers`,
    // and the second list of capabilities in `driver`.
    let mut broken = BTreeMap::new();
    broken.insert(
        "config/drivers.rs".to_string(),
        "    Codex,\n\
         (DriverKind::Codex, \"codex\", \"codex\"),\n\
         DriverKind::Codex => &self.codex,"
            .to_string(),
    );
    broken.insert(
        "driver/mod.rs".to_string(),
        "DriverKind::Codex => codex::Codex::CAPABILITIES,\n\
         DriverKind::Codex => Box::new(codex::Codex),"
            .to_string(),
    );
    assert_eq!(
        driver_knowledge(&broken),
        [
            "config/drivers.rs names the codex Driver on 3 lines",
            "driver/mod.rs names the codex Driver on 2 lines",
        ]
    );
}

/// What `commands/mod.rs` holds besides `mod` and `use` lines and `dispatch`, and which
/// command's arguments are not declared in the command's own file.
fn commands_misplaced(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(code) = files.get("commands/mod.rs") {
        for line in code.lines() {
            let item = line.starts_with("fn ")
                || line.starts_with("pub(crate) fn ")
                || line.starts_with("struct ")
                || line.starts_with("pub(crate) struct ")
                || line.starts_with("impl");
            if item && !line.contains("fn dispatch(") {
                found.push(format!("commands/mod.rs: {line}"));
            }
        }
    }
    if let Some(cli) = files.get("commands/cli.rs") {
        // A variant with fields of its own (`Tick {`) declares a command's arguments
        // outside its file.
        for line in cli.lines().map(str::trim) {
            if line.ends_with(" {") && line.chars().next().is_some_and(char::is_uppercase) {
                found.push(format!("commands/cli.rs: {line}"));
            }
        }
    }
    found
}

/// Issue 24: each command owns its arguments (`#[derive(clap::Args)]` in its own file), and
/// `commands/mod.rs` holds dispatch only.
#[test]
fn each_command_owns_its_arguments_and_the_commands_module_only_dispatches() {
    let found = commands_misplaced(&source_files());
    assert!(found.is_empty(), "{found:#?}");
    // It would have caught this morning's layout.
    let mut broken = BTreeMap::new();
    broken.insert(
        "commands/mod.rs".to_string(),
        "pub(crate) fn dispatch(cli: Cli) -> Result<u8> {\n}\nfn print_json(value: &impl Serialize) -> Result<()> {\n".to_string(),
    );
    broken.insert(
        "commands/cli.rs".to_string(),
        "pub(crate) enum Command {\n    Tick {\n        dry_run: bool,\n    },\n".to_string(),
    );
    assert_eq!(
        commands_misplaced(&broken),
        [
            "commands/mod.rs: fn print_json(value: &impl Serialize) -> Result<()> {",
            "commands/cli.rs: Tick {"
        ]
    );
}

/// The files of `src/` whose code (comments and their tests left out) is over `most`
/// lines.
fn oversized(files: &BTreeMap<String, String>, most: usize) -> Vec<String> {
    files
        .iter()
        .filter(|(path, _)| !path.ends_with("tests.rs"))
        .map(|(path, code)| (path, code.lines().count()))
        .filter(|(_, lines)| *lines > most)
        .map(|(path, lines)| format!("{path}: {lines} lines"))
        .collect()
}

/// Issue 24: no module over 600 lines of code, so that each is one concern a reader holds.
#[test]
fn no_module_is_over_600_lines_of_code() {
    let found = oversized(&source_files(), 600);
    assert!(found.is_empty(), "{found:#?}");
    let mut broken = BTreeMap::new();
    broken.insert("model.rs".to_string(), "x\n".repeat(601));
    assert_eq!(oversized(&broken, 600), ["model.rs: 601 lines"]);
}

/// The functions in `code` longer than `most` lines, by their first line: a function's
/// length runs from its `fn` line to the line that closes its body (braces in string and
/// char literals are not counted).
fn long_functions(code: &str, most: usize) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let head = lines[i].trim_start();
        let is_fn = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn "]
            .iter()
            .any(|p| head.starts_with(p));
        if !is_fn {
            i += 1;
            continue;
        }
        let (mut depth, mut opened, mut end) = (0i64, false, None);
        for (j, line) in lines.iter().enumerate().skip(i) {
            for delta in braces(line) {
                depth += delta;
                opened |= delta > 0;
            }
            if opened && depth == 0 {
                end = Some(j);
                break;
            }
            if !opened && line.trim_end().ends_with(';') {
                break;
            }
        }
        match end {
            Some(j) => {
                if j - i + 1 > most {
                    found.push(format!("{} ({} lines)", head, j - i + 1));
                }
                i = j + 1;
            }
            None => i += 1,
        }
    }
    found
}

/// The braces of a line, as +1 and -1, outside string and char literals and comments.
fn braces(line: &str) -> Vec<i64> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' if in_string => {
                chars.next();
            }
            '"' => in_string = !in_string,
            '\'' if !in_string => {
                // A char literal ('{', '\n'), not a lifetime ('a).
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    chars.nth(2);
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.nth(1);
                }
            }
            '/' if !in_string && chars.peek() == Some(&'/') => break,
            '{' if !in_string => out.push(1),
            '}' if !in_string => out.push(-1),
            _ => {}
        }
    }
    out
}

/// Issue 24: no function over 80 lines outside tests, so that each does one step a reader
/// can hold.
#[test]
fn no_function_is_over_80_lines() {
    let found: Vec<String> = source_files()
        .iter()
        .filter(|(path, _)| !path.ends_with("tests.rs"))
        .flat_map(|(path, code)| {
            long_functions(code, 80)
                .into_iter()
                .map(move |f| format!("{path}: {f}"))
        })
        .collect();
    assert!(found.is_empty(), "{found:#?}");
    let long = format!(
        "fn short() {{\n    let s = \"{{\";\n}}\npub(crate) fn long() {{\n{}}}\n",
        "    x();\n".repeat(80)
    );
    assert_eq!(
        long_functions(&long, 80),
        ["pub(crate) fn long() { (82 lines)"]
    );
    assert!(long_functions(&long, 82).is_empty());
}

/// The files other than `src/wait.rs` whose code waits on a channel with a timeout or polls
/// a child's exit: each such loop is one more place where a deadline or a stop of owl's can
/// be honoured differently.
fn timed_waits(files: &BTreeMap<String, String>) -> Vec<String> {
    files
        .iter()
        .filter(|(path, _)| path.as_str() != "wait.rs")
        .flat_map(|(path, code)| {
            code.lines()
                .filter(|l| l.contains(".recv_timeout(") || l.contains(".try_wait("))
                .map(move |l| format!("{path}: {}", l.trim()))
        })
        .collect()
}

/// Issue 37: every wait with a timeout on a child process (its exit, its lines, its readers)
/// goes through `wait`, the one implementation.
#[test]
fn every_timed_wait_on_a_child_goes_through_the_wait_module() {
    let found = timed_waits(&source_files());
    assert!(found.is_empty(), "{found:#?}");
    // What the check's own wait loop looked like before issue 37.
    let mut broken = BTreeMap::new();
    broken.insert(
        "supervise/check.rs".to_string(),
        "loop {\n    match exited.recv_timeout(TICK) {\n        Ok(exit) => return exit,\n    }\n}\n"
            .to_string(),
    );
    broken.insert(
        "wait.rs".to_string(),
        "match rx.recv_timeout(slice) {}\n".to_string(),
    );
    assert_eq!(
        timed_waits(&broken),
        ["supervise/check.rs: match exited.recv_timeout(TICK) {"]
    );
}

/// The functions a module shows beyond itself (any `pub`, and a trait's methods) that
/// return a `Result` whose error is a bare `String`: a reason in words, which the caller can
/// only print, where a type would say which failure it is.
fn string_errors(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    for (path, code) in files {
        let mut in_trait = false;
        let lines: Vec<&str> = code.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            if !line.starts_with(' ') && trimmed.contains("trait ") && line.ends_with('{') {
                in_trait = true;
            } else if *line == "}" {
                in_trait = false;
            }
            let Some(at) = trimmed.find("fn ") else {
                continue;
            };
            let shown = trimmed.starts_with("pub") || (in_trait && at == 0);
            if !shown {
                continue;
            }
            // The signature, to its body or its `;`.
            let signature: String = lines[i..]
                .iter()
                .take_while(|l| !l.trim_end().ends_with('{') && !l.trim_end().ends_with(';'))
                .chain(
                    lines[i..]
                        .iter()
                        .find(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';')),
                )
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join(" ");
            let returns = signature.split("->").nth(1).unwrap_or("");
            if returns.contains("Result<") && returns.contains(", String>") {
                found.push(format!("{path}: {}", trimmed));
            }
        }
    }
    found
}

/// Issue 24, held by issue 37: no `Result<_, String>` across a module boundary.
#[test]
fn no_string_is_an_error_across_a_module_boundary() {
    let found = string_errors(&source_files());
    assert!(found.is_empty(), "{found:#?}");
    let mut broken = BTreeMap::new();
    broken.insert(
        "supervise/check.rs".to_string(),
        "fn local(name: &str) -> Result<PathBuf, String> {\n}\n\
         pub(crate) fn resolve_program(\n    name: &str,\n) -> Result<PathBuf, String> {\n}\n"
            .to_string(),
    );
    broken.insert(
        "supervise/process.rs".to_string(),
        "pub(crate) trait Executor {\n    fn ready(&self) -> Result<(), String> {\n        Ok(())\n    }\n}\n"
            .to_string(),
    );
    assert_eq!(
        string_errors(&broken),
        [
            "supervise/check.rs: pub(crate) fn resolve_program(",
            "supervise/process.rs: fn ready(&self) -> Result<(), String> {"
        ]
    );
}

/// The names of the items `code` makes public (`pub`, not `pub(crate)` or narrower): with
/// `#![warn(unreachable_pub)]` in lib.rs, each is reachable from outside the crate.
fn public_items(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in code.lines() {
        let Some(rest) = line.trim_start().strip_prefix("pub ") else {
            continue;
        };
        let rest = rest
            .trim_start_matches("unsafe ")
            .trim_start_matches("async ");
        let item = [
            "fn ", "const ", "static ", "struct ", "enum ", "trait ", "type ", "mod ",
        ]
        .iter()
        .find_map(|kw| rest.strip_prefix(kw));
        let named: Vec<&str> = match (item, rest.strip_prefix("use ")) {
            (Some(after), _) => vec![after],
            // `pub use a::b;`, `pub use a::{b, c};`: the names it brings.
            (None, Some(path)) => path
                .trim_end_matches(';')
                .rsplit("::")
                .next()
                .unwrap_or("")
                .trim_matches(['{', '}'])
                .split(',')
                .collect(),
            // A field: `pub name: Type`.
            (None, None) => vec![rest],
        };
        for n in named {
            let name: String = n
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.push(name);
            }
        }
    }
    names
}

/// Whether `name` occurs in `text` as a whole word.
fn names(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !word(before) && !word(after)
    })
}

/// The public items of `files` that nothing in `outside` names: a surface nobody uses.
fn unused_public(files: &BTreeMap<String, String>, outside: &str) -> Vec<String> {
    files
        .iter()
        .flat_map(|(path, code)| {
            public_items(code)
                .into_iter()
                .filter(|name| !names(outside, name))
                .map(move |name| format!("{path}: {name}"))
        })
        .collect()
}

/// What is outside the crate and uses it: `main.rs`, the integration tests, the benches.
fn outside_the_crate() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = rust_files(&root.join("tests"));
    files.extend(rust_files(&root.join("benches")));
    files.push(root.join("src/main.rs"));
    files
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect()
}

/// Issue 37: owl is a binary; its crate is `pub(crate)` by default, and every public item is
/// one that `main.rs`, the integration tests or the benches use.
#[test]
fn every_public_item_is_used_outside_the_crate() {
    let files: BTreeMap<String, String> = source_files()
        .into_iter()
        .filter(|(path, _)| path != "main.rs")
        .collect();
    let outside = outside_the_crate();
    let unused = unused_public(&files, &outside);
    assert!(
        unused.is_empty(),
        "public, and used by nothing outside: {unused:#?}"
    );
    // The surface is small: a handful of items in lib.rs and the mocks' API.
    let count: usize = files.values().map(|c| public_items(c).len()).sum();
    assert!(count < 80, "{count} public items");
    let mut broken = BTreeMap::new();
    broken.insert(
        "conformance/mock/api.rs".to_string(),
        "pub struct MockApi {\n    pub requests: Vec<u8>,\n    pub(crate) port: u16,\n}\n\
         impl MockApi {\n    pub fn start() {}\n    pub fn reset_for_a_test_nobody_wrote() {}\n}\n\
         pub use crate::x::{MockApi, Reply};\n"
            .to_string(),
    );
    let outside = "let mock = MockApi::start(); mock.requests; Reply::text(\"x\");";
    assert_eq!(
        unused_public(&broken, outside),
        ["conformance/mock/api.rs: reset_for_a_test_nobody_wrote"]
    );
}
