//! The conversion report: per object, per field, what became of it; as text for people and as
//! JSON for scripts.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use super::fields::{self, Fields};

/// What became of a field (or of a whole object).
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Carried over with the same meaning (same path unless `to` says otherwise).
    Mapped,
    /// Carried over in another form: renamed, moved, another value or format; or removed
    /// because this project does the same without it.
    Changed,
    /// Not carried over: this project has no equivalent. Makes the command exit with 2.
    Dropped,
    /// Left out because it is not the user's to carry: status, server-set metadata, empty
    /// values.
    Omitted,
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Outcome::Mapped => "mapped",
            Outcome::Changed => "changed",
            Outcome::Dropped => "dropped",
            Outcome::Omitted => "omitted",
        }
    }
}

/// One field of an input object.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct FieldReport {
    /// Path in the input, e.g. `spec.container.cpu`.
    pub field: String,
    pub outcome: Outcome,
    /// Path in the output, when carried over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Why, or what to do.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// One input object.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    /// `FILE, document N`.
    pub source: String,
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Changed: converted; Mapped: copied unchanged; Dropped: nothing written for it; Omitted:
    /// deliberately not written (the note says why).
    pub outcome: Outcome,
    pub note: String,
    pub fields: Vec<FieldReport>,
    /// What to know about the object as a whole.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl ObjectReport {
    pub fn new(
        source: &str,
        api_version: &str,
        kind: &str,
        name: Option<String>,
        namespace: Option<String>,
    ) -> Self {
        Self {
            source: source.to_string(),
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            name,
            namespace,
            outcome: Outcome::Changed,
            note: String::new(),
            fields: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// `Kind namespace/name`.
    pub fn title(&self) -> String {
        let name = self.name.as_deref().unwrap_or("(no name)");
        match &self.namespace {
            Some(namespace) => format!("{} {namespace}/{name}", self.kind),
            None => format!("{} {name}", self.kind),
        }
    }

    /// Whether something of this object was not carried over.
    pub fn dropped_anything(&self) -> bool {
        self.outcome == Outcome::Dropped
            || self.fields.iter().any(|f| f.outcome == Outcome::Dropped)
    }

    /// The entry of `field`, if reported.
    pub fn field(&self, field: &str) -> Option<&FieldReport> {
        self.fields.iter().find(|f| f.field == field)
    }
}

/// The whole report.
#[derive(Serialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Report {
    pub objects: Vec<ObjectReport>,
}

/// Totals of a report.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub objects: usize,
    pub objects_written: usize,
    pub objects_dropped: usize,
    pub fields_mapped: usize,
    pub fields_changed: usize,
    pub fields_dropped: usize,
    pub fields_omitted: usize,
}

impl Report {
    /// Whether anything was not carried over (the command then exits with 2).
    pub fn dropped_anything(&self) -> bool {
        self.objects.iter().any(ObjectReport::dropped_anything)
    }

    pub fn summary(&self) -> Summary {
        let mut summary = Summary {
            objects: self.objects.len(),
            ..Summary::default()
        };
        for object in &self.objects {
            match object.outcome {
                Outcome::Mapped | Outcome::Changed => summary.objects_written += 1,
                Outcome::Dropped => summary.objects_dropped += 1,
                Outcome::Omitted => {}
            }
            for field in &object.fields {
                match field.outcome {
                    Outcome::Mapped => summary.fields_mapped += 1,
                    Outcome::Changed => summary.fields_changed += 1,
                    Outcome::Dropped => summary.fields_dropped += 1,
                    Outcome::Omitted => summary.fields_omitted += 1,
                }
            }
        }
        summary
    }

    /// The report as text, one line per field, grouped by object.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for object in &self.objects {
            let _ = writeln!(
                out,
                "{} ({}): {}: {}",
                object.title(),
                object.source,
                object.outcome.word(),
                object.note
            );
            for field in &object.fields {
                let target = match &field.to {
                    Some(to) if *to != field.field => format!(" -> {to}"),
                    _ => String::new(),
                };
                let note = if field.note.is_empty() {
                    String::new()
                } else {
                    format!(": {}", field.note)
                };
                let _ = writeln!(
                    out,
                    "  {:<8} {}{target}{note}",
                    field.outcome.word(),
                    field.field
                );
            }
            for note in &object.notes {
                let _ = writeln!(out, "  note     {note}");
            }
        }
        let summary = self.summary();
        let _ = writeln!(
            out,
            "{} objects: {} written, {} dropped; fields: {} mapped, {} changed, {} dropped, {} omitted",
            summary.objects,
            summary.objects_written,
            summary.objects_dropped,
            summary.fields_mapped,
            summary.fields_changed,
            summary.fields_dropped,
            summary.fields_omitted
        );
        if self.dropped_anything() {
            out.push_str(
                "Some settings were not carried over (\"dropped\" above): review them before applying the output.\n",
            );
        }
        out
    }

    /// The report as JSON: `{"objects": [...], "summary": {...}, "droppedAnything": bool}`.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Whole<'a> {
            objects: &'a [ObjectReport],
            summary: Summary,
            dropped_anything: bool,
        }
        serde_json::to_string_pretty(&Whole {
            objects: &self.objects,
            summary: self.summary(),
            dropped_anything: self.dropped_anything(),
        })
    }
}

/// What a kind's converter records while it converts one object.
#[derive(Debug, Default)]
pub struct Log {
    pub fields: Vec<FieldReport>,
    pub notes: Vec<String>,
    /// The object's outcome when not the default (converted): e.g. dropped, for a Batch.
    pub object: Option<(Outcome, String)>,
}

impl Log {
    fn push(&mut self, field: String, outcome: Outcome, to: Option<String>, note: &str) {
        self.fields.push(FieldReport {
            field,
            outcome,
            to,
            note: note.to_string(),
        });
    }

    /// `field` carried over to the same path.
    pub fn mapped(&mut self, field: &str, note: &str) {
        self.push(
            field.to_string(),
            Outcome::Mapped,
            Some(field.to_string()),
            note,
        );
    }

    /// `field` carried over, with the same meaning, to another path.
    pub fn mapped_to(&mut self, field: &str, to: &str, note: &str) {
        self.push(
            field.to_string(),
            Outcome::Mapped,
            Some(to.to_string()),
            note,
        );
    }

    /// `field` carried over in another form to `to`.
    pub fn changed(&mut self, field: &str, to: &str, note: &str) {
        self.push(
            field.to_string(),
            Outcome::Changed,
            Some(to.to_string()),
            note,
        );
    }

    /// `field` removed, since this project does what it said without it.
    pub fn removed(&mut self, field: &str, note: &str) {
        self.push(field.to_string(), Outcome::Changed, None, note);
    }

    /// `field` (with `value`) not carried over, for `reason`; an empty value is only omitted.
    pub fn dropped(&mut self, field: &str, value: &Value, reason: &str) {
        if fields::is_empty(value) {
            self.omitted(field, "empty");
        } else {
            self.push(field.to_string(), Outcome::Dropped, None, reason);
        }
    }

    /// `field` left out: not the user's to carry.
    pub fn omitted(&mut self, field: &str, note: &str) {
        self.push(field.to_string(), Outcome::Omitted, None, note);
    }

    /// A note about the whole object.
    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// Every field not taken: unknown to the converter, dropped.
    pub fn unknown(&mut self, fields: Fields) {
        for (path, value) in fields.rest() {
            self.dropped(
                &path,
                &value,
                "not a field of infinispan-operator's API as the converter knows it: not converted",
            );
        }
    }

    /// Drops `key` of `fields` (when present) for `reason`.
    pub fn drop_field(&mut self, fields: &mut Fields, key: &str, reason: &str) {
        let path = fields.path(key);
        if let Some(value) = fields.take(key) {
            self.dropped(&path, &value, reason);
        }
    }

    /// Takes the string `key` of `fields`; an empty one is omitted (reported) and gives `None`.
    pub fn take_text(
        &mut self,
        fields: &mut Fields,
        key: &str,
    ) -> Result<Option<String>, super::FieldError> {
        let path = fields.path(key);
        let text: Option<String> = fields.take_as(key)?;
        Ok(match text {
            Some(text) if text.is_empty() => {
                self.omitted(&path, "empty");
                None
            }
            other => other,
        })
    }

    /// Omits `key` of `fields` (when present) with `note`.
    pub fn omit_field(&mut self, fields: &mut Fields, key: &str, note: &str) {
        let path = fields.path(key);
        if fields.take(key).is_some() {
            self.omitted(&path, note);
        }
    }
}
