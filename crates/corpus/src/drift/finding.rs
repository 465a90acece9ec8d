//! What drift finds: one difference from the baseline ([`Finding`]), how
//! bad it is ([`Class`]) and what it is about ([`FindingKind`]). The rules
//! (`compare`) make them; the report shows them.

use serde::Serialize;
use std::fmt;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Data a user sees would be lost or misread: exit 1.
    Breaking,
    /// New, or unused by the decoder: printed as a warning.
    Additive,
    /// Worth knowing, loses nothing (an absent optional path): a note.
    Info,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    MissingLoadBearing,
    WireTypeChange,
    VanishedStepType,
    DecodeErrors,
    VanishedTable,
    VanishedColumn,
    UnknownWrite,
    ModelsFormat,
    NewStatus,
    NewStepType,
    NewPath,
    NewTable,
    NewColumn,
    SchemaChange,
    /// A load-bearing path absent, its content carried by an alternative.
    CarriedElsewhere,
    /// An optional or zero-able path absent (proto3 omitted it).
    AbsentPath,
}

/// One difference from the baseline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub class: Class,
    pub kind: FindingKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_type: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The readable sentence (without the class prefix).
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

impl Finding {
    pub(super) fn at(&mut self, step_type: i64) -> &mut Self {
        self.step_type = Some(step_type);
        self
    }

    pub(super) fn path(&mut self, path: &str) -> &mut Self {
        self.path = Some(path.to_string());
        self
    }

    pub(super) fn example(&mut self, example: &str) -> &mut Self {
        self.example = Some(example.to_string()).filter(|e| !e.is_empty());
        self
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.class {
            Class::Breaking => "BREAKING",
            Class::Additive => "warning",
            Class::Info => "note",
        };
        write!(f, "{tag}: {}", self.message)
    }
}
