//! The converter over the manifests of `testdata/`: each file's output parses back into this
//! project's types and matches its golden copy (`<name>.out.yaml`), and so does its report
//! (`<name>.report.txt`); `UPDATE_SNAPSHOTS=1 cargo test -p cluster-operator` rewrites them.
//! Then the command itself, in-process, for its exit statuses.

use std::path::PathBuf;

use common_crds::{Backup, Cache, Infinispan, Restore};
use serde_json::Value;

use super::command::{ExitStatus, run, to_yaml};
use super::*;
use crate::build::snapshot::drift_message;
use crate::cli::{ConvertArgs, ReportFormat};

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/convert/testdata")
        .join(name)
}

/// Converts `text` (named `source`); panics on unreadable input.
pub(super) fn convert_text(source: &str, text: &str) -> Conversion {
    let documents = parse_documents(source, text).unwrap_or_else(|e| panic!("{e}"));
    convert_documents(documents).unwrap_or_else(|e| panic!("{e}"))
}

/// The report of the only object of `text`.
pub(super) fn only_report(text: &str) -> (Vec<Converted>, ObjectReport) {
    let Conversion {
        objects, report, ..
    } = convert_text("test", text);
    let [object] = &report.objects[..] else {
        panic!("one object: {report:?}");
    };
    (objects, object.clone())
}

/// Asserts that `field` is reported with `outcome`, to `to`, with a note containing `note`.
#[track_caller]
pub(super) fn assert_field(
    report: &ObjectReport,
    field: &str,
    outcome: Outcome,
    to: Option<&str>,
    note: &str,
) {
    let Some(entry) = report.field(field) else {
        panic!("{field} is not reported:\n{}", text(report));
    };
    assert_eq!(entry.outcome, outcome, "{field}: {entry:?}");
    assert_eq!(entry.to.as_deref(), to, "{field}: {entry:?}");
    assert!(
        entry.note.contains(note),
        "{field}: {entry:?} lacks {note:?}"
    );
}

fn text(report: &ObjectReport) -> String {
    Report {
        objects: vec![report.clone()],
    }
    .to_text()
}

/// Compares `actual` with the golden file `name`; `UPDATE_SNAPSHOTS=1` rewrites it.
fn assert_golden(name: &str, actual: &str) {
    let path = testdata(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (UPDATE_SNAPSHOTS=1 cargo test -p cluster-operator writes it)",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} drifted (- golden, + converted); if intended, review and run UPDATE_SNAPSHOTS=1 cargo test -p cluster-operator\n{}",
        path.display(),
        drift_message(&expected, actual)
    );
}

/// Parses every document of `yaml` back into this project's type of its kind.
fn parse_back(yaml: &str) -> Vec<String> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap_or_else(|e| panic!("{e}"));
    documents
        .into_iter()
        .map(|document| {
            let kind = document["kind"].as_str().unwrap_or_default().to_string();
            let api_version = document["apiVersion"].as_str().unwrap_or_default();
            let parsed = match (api_version, kind.as_str()) {
                ("infinispan.org/v1", "Infinispan") => {
                    serde_json::from_value::<Infinispan>(document).map(|_| ())
                }
                ("infinispan.org/v2alpha1", "Cache") => {
                    let cache = serde_json::from_value::<Cache>(document.clone());
                    if let Ok(cache) = &cache {
                        let labels = cache.metadata.labels.clone().unwrap_or_default();
                        assert!(labels.contains_key(common_crds::labels::CLUSTER_LABEL));
                        assert!(
                            cache.spec.template.is_some() != cache.spec.template_name.is_some()
                        );
                    }
                    cache.map(|_| ())
                }
                ("infinispan.org/v2alpha1", "Backup") => {
                    serde_json::from_value::<Backup>(document).map(|_| ())
                }
                ("infinispan.org/v2alpha1", "Restore") => {
                    serde_json::from_value::<Restore>(document).map(|_| ())
                }
                ("infinispan.org/v2alpha1", "Batch") => {
                    serde_json::from_value::<common_crds::Batch>(document).map(|_| ())
                }
                ("v1", _) => Ok(()),
                other => panic!("unexpected output {other:?}"),
            };
            parsed.unwrap_or_else(|e| panic!("{kind}: {e}"));
            kind
        })
        .collect()
}

#[test]
fn every_sample_converts_into_objects_of_this_project_and_a_known_report() {
    // (file, kinds written, whether something is dropped)
    let cases: [(&str, &[&str], bool); 5] = [
        ("minimal", &["Infinispan"], false),
        ("secured", &["Infinispan", "Infinispan"], true),
        ("caches", &["Cache", "Cache"], true),
        ("backup-restore", &["Backup", "Restore", "Backup"], true),
        ("batch", &["Batch", "Batch", "ConfigMap"], false),
    ];
    for (name, kinds, dropped) in cases {
        let file = format!("{name}.yaml");
        let text = std::fs::read_to_string(testdata(&file)).unwrap_or_else(|e| panic!("{e}"));
        let conversion = convert_text(&file, &text);
        let yaml = to_yaml(&conversion).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parse_back(&yaml), *kinds, "{name}");
        assert_eq!(conversion.report.dropped_anything(), dropped, "{name}");
        let json = conversion
            .report
            .to_json()
            .unwrap_or_else(|e| panic!("{e}"));
        let json: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(json["droppedAnything"], Value::Bool(dropped), "{name}");
        assert_golden(&format!("{name}.out.yaml"), &yaml);
        assert_golden(&format!("{name}.report.txt"), &conversion.report.to_text());
    }
}

#[test]
fn converting_the_output_again_keeps_it() {
    // This project's Template, Counter, Schema and Task are copied; a converted Cache, once
    // converted back by hand, is not what this converter reads (no spec.clusterName).
    let (objects, report) = only_report(
        "apiVersion: infinispan.org/v2alpha1\nkind: Counter\nmetadata: {name: c}\nspec: {type: weak}\n",
    );
    assert_eq!(report.outcome, Outcome::Mapped);
    assert!(matches!(&objects[..], [Converted::Unchanged(_)]));
}

#[test]
fn unknown_kinds_of_the_group_are_dropped_and_lists_are_unpacked() {
    let conversion = convert_text(
        "test",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: infinispan.org/v1\n  kind: Infinispan\n  metadata: {name: a}\n  spec: {replicas: 1, version: 16.0.7}\n- apiVersion: infinispan.org/v9\n  kind: Gadget\n  metadata: {name: g}\n",
    );
    assert_eq!(conversion.objects.len(), 1);
    assert_eq!(
        conversion.report.objects[0].source,
        "test, document 1, item 1"
    );
    assert_eq!(conversion.report.objects[1].outcome, Outcome::Dropped);
    assert!(conversion.report.dropped_anything());
}

#[test]
fn unreadable_input_is_an_error_naming_where() {
    let error = |text: &str| match parse_documents("in.yaml", text).and_then(convert_documents) {
        Ok(conversion) => panic!("converted: {conversion:?}"),
        Err(error) => error.to_string(),
    };
    assert!(
        error("a: [b\n").starts_with("in.yaml: not valid YAML"),
        "{}",
        error("a: [b\n")
    );
    assert_eq!(
        error("- a\n"),
        "in.yaml, document 1: a document must be a Kubernetes object (a mapping with apiVersion and kind)"
    );
    assert_eq!(
        error(
            "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata: {name: a}\nspec: {replicas: three}\n"
        ),
        "in.yaml, document 1: Infinispan a: spec.replicas: cannot be read: invalid type: string \"three\", expected i32"
    );
    assert_eq!(
        error(
            "apiVersion: infinispan.org/v2alpha1\nkind: Cache\nmetadata: {name: c}\nspec: {template: x}\n"
        ),
        "in.yaml, document 1: Cache c: spec.clusterName: missing"
    );
}

fn args(files: &[&str], format: ReportFormat) -> ConvertArgs {
    ConvertArgs {
        files: files.iter().map(PathBuf::from).collect(),
        output: None,
        report_format: format,
    }
}

/// Runs the command in-process: (status, stdout, stderr).
fn run_command(args: &ConvertArgs, stdin: &str) -> (ExitStatus, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = run(args, &mut stdin.as_bytes(), &mut out, &mut err);
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap_or_else(|e| panic!("{e}"));
    (status, text(out), text(err))
}

#[test]
fn the_command_exits_0_when_everything_is_carried_over() {
    let minimal = testdata("minimal.yaml");
    let minimal = minimal.to_str().unwrap_or_default();
    let (status, out, err) = run_command(&args(&[minimal], ReportFormat::Text), "");
    assert_eq!((status, status.code()), (ExitStatus::Converted, 0), "{err}");
    assert!(
        out.starts_with("---\napiVersion: infinispan.org/v1\nkind: Infinispan\n"),
        "{out}"
    );
    assert!(err.contains("Infinispan demo ("), "{err}");
    // No file: standard input, like `-`.
    let text = std::fs::read_to_string(minimal).unwrap_or_default();
    for files in [&[][..], &["-"][..]] {
        let (status, stdin_out, _) = run_command(&args(files, ReportFormat::Text), &text);
        assert_eq!(status, ExitStatus::Converted);
        assert_eq!(stdin_out, out);
    }
}

#[test]
fn the_command_exits_2_when_something_is_dropped() {
    let batch = testdata("batch.yaml");
    let caches = testdata("caches.yaml");
    let files = [
        batch.to_str().unwrap_or_default(),
        caches.to_str().unwrap_or_default(),
    ];
    let (status, out, err) = run_command(&args(&files, ReportFormat::Json), "");
    // A field of caches.yaml (adminAuth) has no equivalent: exit 2, every object written.
    assert_eq!((status, status.code()), (ExitStatus::Dropped, 2));
    let report: Value = serde_json::from_str(&err).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(report["summary"]["objectsDropped"], 0);
    assert_eq!(report["objects"][0]["kind"], "Batch");
    assert_ne!(report["objects"][0]["outcome"], "dropped");
    assert_eq!(out.matches("kind: Batch\n").count(), 2, "{out}");
    assert_eq!(out.matches("kind: Cache\n").count(), 2, "{out}");
    // -o writes the objects to a file, not to standard output.
    let dir = std::env::temp_dir().join(format!("convert-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let output = dir.join("out.yaml");
    let mut with_output = args(&files, ReportFormat::Text);
    with_output.output = Some(output.clone());
    let (status, stdout, _) = run_command(&with_output, "");
    assert_eq!(status, ExitStatus::Dropped);
    assert_eq!(stdout, "");
    assert_eq!(std::fs::read_to_string(&output).unwrap_or_default(), out);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_command_exits_1_on_unreadable_input() {
    let (status, out, err) = run_command(&args(&[], ReportFormat::Text), "kind: [\n");
    assert_eq!((status, status.code()), (ExitStatus::Failed, 1));
    assert_eq!(out, "");
    assert!(
        err.starts_with("cluster-operator convert: stdin: not valid YAML"),
        "{err}"
    );
    let (status, _, err) = run_command(&args(&["/nonexistent/x.yaml"], ReportFormat::Text), "");
    assert_eq!(status, ExitStatus::Failed);
    assert!(
        err.starts_with("cluster-operator convert: reading /nonexistent/x.yaml: "),
        "{err}"
    );
    let (status, _, err) = run_command(
        &args(&[], ReportFormat::Text),
        "apiVersion: infinispan.org/v1\nkind: Infinispan\nmetadata: {name: a}\nspec:\n  container: {cpu: \"1:2:3\"}\n",
    );
    assert_eq!(status, ExitStatus::Failed);
    assert!(
        err.contains("spec.container.cpu: \"1:2:3\" is not"),
        "{err}"
    );
}
