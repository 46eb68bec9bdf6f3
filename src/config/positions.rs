//! Where every key and value of a config file stands, from the YAML parser's own marks; a key given twice, and input too deep to be a config, are refused here.

use std::collections::BTreeMap;

use yaml_rust2::parser::{Event, Parser};

/// Deeper than any owl config: a bound on the work a hostile file can cause.
const MAX_DEPTH: usize = 32;
/// More than any owl config holds.
const MAX_EVENTS: usize = 200_000;

/// The line (1-based) of every key and every value, by its dotted path
/// (`accounts.work.limits.weeklyMax`, `defaults.allowedTools[2]`).
#[derive(Debug, Default)]
pub(crate) struct Positions {
    keys: BTreeMap<String, usize>,
    values: BTreeMap<String, (usize, Option<String>)>,
}

/// Why a config's structure is refused before its values are read.
#[derive(Debug, PartialEq)]
pub(crate) struct StructureError {
    pub(crate) line: Option<usize>,
    pub(crate) message: String,
}

enum Frame {
    Mapping {
        path: String,
        /// The key whose value comes next.
        key: Option<String>,
        seen: BTreeMap<String, usize>,
    },
    Sequence {
        path: String,
        next: usize,
    },
}

impl Positions {
    /// Reads `text` once with the YAML parser, recording positions.
    pub(crate) fn read(text: &str) -> Result<Positions, StructureError> {
        let mut parser = Parser::new_from_str(text);
        let mut out = Positions::default();
        let mut stack: Vec<Frame> = Vec::new();
        for _ in 0..MAX_EVENTS {
            let (event, mark) = parser.next_token().map_err(|e| StructureError {
                line: Some(e.marker().line()),
                message: e.info().to_string(),
            })?;
            let line = mark.line();
            match event {
                Event::StreamEnd => return Ok(out),
                Event::Alias(_) => {
                    return Err(StructureError {
                        line: Some(line),
                        message: "YAML aliases (*name) are not read in an owl config; \
                                  write the value out"
                            .into(),
                    })
                }
                Event::Scalar(value, ..) => {
                    if let Some(Frame::Mapping { path, key, seen }) = stack.last_mut() {
                        if key.is_none() {
                            let full = join(path, &value);
                            if let Some(first) = seen.insert(value.clone(), line) {
                                return Err(StructureError {
                                    line: Some(line),
                                    message: format!(
                                        "key '{value}' is given twice{} (lines {first} and {line}); \
                                         only one can count",
                                        within(path)
                                    ),
                                });
                            }
                            out.keys.insert(full, line);
                            *key = Some(value);
                            continue;
                        }
                    }
                    let path = value_path(&mut stack);
                    out.values.insert(path, (line, Some(value)));
                }
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let path = value_path(&mut stack);
                    if stack.len() >= MAX_DEPTH {
                        return Err(StructureError {
                            line: Some(line),
                            message: format!("nested deeper than {MAX_DEPTH} levels"),
                        });
                    }
                    out.values.insert(path.clone(), (line, None));
                    stack.push(match event {
                        Event::MappingStart(..) => Frame::Mapping {
                            path,
                            key: None,
                            seen: BTreeMap::new(),
                        },
                        _ => Frame::Sequence { path, next: 0 },
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                }
                _ => {}
            }
        }
        Err(StructureError {
            line: None,
            message: format!("more than {MAX_EVENTS} YAML nodes: this is not an owl config"),
        })
    }

    /// The line of the key at `path`.
    pub(super) fn key_line(&self, path: &str) -> Option<usize> {
        self.keys.get(path).copied()
    }

    /// The line of the value at `path`.
    pub(crate) fn value_line(&self, path: &str) -> Option<usize> {
        self.values.get(path).map(|(line, _)| *line)
    }

    /// The keys of the mapping at `path`, each with its line: `after` for `[0].after`.
    pub(crate) fn keys_under(&self, path: &str) -> BTreeMap<String, usize> {
        let prefix = format!("{path}.");
        self.keys
            .iter()
            .filter_map(|(k, line)| {
                let key = k.strip_prefix(&prefix)?;
                (!key.contains('.')).then(|| (key.to_string(), *line))
            })
            .collect()
    }

    /// The line of a scalar equal to `value` at `path` or below it: how an error that
    /// names only the enclosing mapping (as serde_yaml's do) finds its value's own line.
    pub(super) fn find_value(&self, path: &str, value: &str) -> Option<usize> {
        self.find_value_at(path, value).map(|(_, line)| line)
    }

    /// Like [`Positions::find_value`], with the value's own path (`accounts.work.limits.nightMax`).
    pub(super) fn find_value_at(&self, path: &str, value: &str) -> Option<(String, usize)> {
        self.values
            .iter()
            .filter(|(p, _)| path.is_empty() || *p == path || p.starts_with(&format!("{path}.")))
            .find(|(_, (_, v))| v.as_deref() == Some(value))
            .map(|(p, (line, _))| (p.clone(), *line))
    }
}

/// The path of the value that comes next, moving its frame on.
fn value_path(stack: &mut [Frame]) -> String {
    match stack.last_mut() {
        None => String::new(),
        Some(Frame::Mapping { path, key, .. }) => join(path, &key.take().unwrap_or_default()),
        Some(Frame::Sequence { path, next }) => {
            *next += 1;
            format!("{path}[{}]", *next - 1)
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn within(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" in '{path}'")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "stateDir: /s\ndefaults:\n  priority: 120\n  allowedTools: [Read, Write]\naccounts:\n  work:\n    limits:\n      weeklyMax: 120\n";

    #[test]
    fn keys_and_values_have_their_own_lines() {
        let p = Positions::read(TEXT).unwrap();
        assert_eq!(p.key_line("stateDir"), Some(1));
        assert_eq!(p.value_line("defaults.priority"), Some(3));
        assert_eq!(p.value_line("defaults.allowedTools[1]"), Some(4));
        assert_eq!(p.key_line("accounts.work.limits.weeklyMax"), Some(8));
        // The same value stands earlier in the file; within its mapping it is found.
        assert_eq!(p.find_value("accounts.work.limits", "120"), Some(8));
        assert_eq!(p.find_value("defaults", "120"), Some(3));
    }

    #[test]
    fn a_key_given_twice_names_both_lines() {
        let e = Positions::read("accounts:\n  work: {}\n  home: {}\n  work:\n    limits: {}\n")
            .unwrap_err();
        assert_eq!(e.line, Some(4));
        assert_eq!(
            e.message,
            "key 'work' is given twice in 'accounts' (lines 2 and 4); only one can count"
        );
        let e = Positions::read("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(
            e.message,
            "key 'a' is given twice (lines 1 and 3); only one can count"
        );
        let e = Positions::read("x:\n  env: {K: 1, K: 2}\n").unwrap_err();
        assert!(
            e.message.contains("key 'K' is given twice in 'x.env'"),
            "{e:?}"
        );
    }

    #[test]
    fn deep_nesting_and_aliases_are_refused_quickly() {
        // Refused at the 33rd level, whatever follows: the work is bounded by design.
        let e = Positions::read(&"[".repeat(40)).unwrap_err();
        assert_eq!(e.message, "nested deeper than 32 levels");
        // Far deeper, the parser's own recursion limit answers first.
        assert!(Positions::read(&"[".repeat(50_000)).is_err());
        let e = Positions::read("a: &x 1\nb: *x\n").unwrap_err();
        assert!(e.message.contains("aliases"), "{e:?}");
    }
}
