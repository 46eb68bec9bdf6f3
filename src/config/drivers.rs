//! The Drivers config.yaml can name: one table of kind, name and default command, and each Driver's settings (its command).

use super::*;

/// The agent CLIs owl has a Driver for. The first is the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum DriverKind {
    #[default]
    ClaudeCode,
    Gemini,
    Codex,
}

/// Every Driver, one row each: its kind, its name in config.yaml, and the command it runs
/// when `drivers.<name>.command` is not set. A new Driver is a row here and a line in
/// `driver::for_kind`; nothing in config reads a Driver by its own name.
pub(super) const DRIVERS: [(DriverKind, &str, &str); 3] = [
    (DriverKind::ClaudeCode, "claude-code", "claude"),
    (DriverKind::Gemini, "gemini", "gemini"),
    (DriverKind::Codex, "codex", "codex"),
];

/// The Drivers' names, in the table's order (for errors that list them).
pub(super) const DRIVER_NAMES: [&str; DRIVERS.len()] = {
    let mut names = [""; DRIVERS.len()];
    let mut i = 0;
    while i < DRIVERS.len() {
        names[i] = DRIVERS[i].1;
        i += 1;
    }
    names
};

impl DriverKind {
    /// Every Driver, in the table's order.
    pub(crate) fn all() -> impl Iterator<Item = DriverKind> {
        DRIVERS.iter().map(|(kind, _, _)| *kind)
    }

    /// The Driver config.yaml names `name`.
    pub(crate) fn from_name(name: &str) -> Option<DriverKind> {
        DRIVERS
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(kind, _, _)| *kind)
    }

    fn row(self) -> &'static (DriverKind, &'static str, &'static str) {
        DRIVERS
            .iter()
            .find(|(kind, _, _)| *kind == self)
            .expect("every DriverKind has its row")
    }

    /// The name used in config.yaml.
    pub(crate) fn name(self) -> &'static str {
        self.row().1
    }

    /// The command run when `drivers.<name>.command` is not set.
    pub(crate) fn default_command(self) -> &'static str {
        self.row().2
    }

    /// The config key that names this Driver's command.
    pub(crate) fn command_key(self) -> String {
        format!("drivers.{}.command", self.name())
    }
}

impl Serialize for DriverKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for DriverKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        DriverKind::from_name(&name)
            .ok_or_else(|| serde::de::Error::unknown_variant(&name, &DRIVER_NAMES))
    }
}

/// Per-Driver settings, one entry for every Driver.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Drivers(pub(crate) BTreeMap<DriverKind, DriverSettings>);

impl Drivers {
    /// The settings of one Driver.
    pub(crate) fn get(&self, kind: DriverKind) -> &DriverSettings {
        &self.0[&kind]
    }
}

/// How to start one agent CLI.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DriverSettings {
    pub(crate) command: PathBuf,
}
