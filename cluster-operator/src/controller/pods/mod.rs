//! What keeps a cluster's pods from running, read from their status (pure): the kubelet's and
//! the scheduler's own words, turned into one [`Problem`] for the CR's conditions.
//!
//! The cluster operator watches the pods it makes (label `app.kubernetes.io/managed-by`), and
//! [`problem`] looks at those of one workload, the servers or the resources operator. Like the
//! workload controllers of other operators (Knative's Revision `ContainerHealthy` and
//! `ResourcesAvailable`, for one), it reports what `kubectl get pods` and `kubectl describe pod`
//! would show, so that the user need not dig:
//!
//! | what the pod says | reason (servers / resources operator) |
//! |---|---|
//! | a container waits with `ErrImagePull`, `ImagePullBackOff`, `InvalidImageName`, `ErrImageNeverPull`, `RegistryUnavailable` or `SignatureValidationFailed` | `ImagePullFailed` |
//! | a container waits with `CrashLoopBackOff`, or runs again, not started yet, after a run that ended | `ServerCrashLooping` / `CrashLooping` |
//! | a container ended and was not restarted yet, or cannot be created or run (`CreateContainerConfigError`, `CreateContainerError`, `RunContainerError`, a failed hook) | `ServerFailing` / `Failing` |
//! | the scheduler found no node (`PodScheduled=False`, reason `Unschedulable`) | `Unschedulable` |
//!
//! Init containers count like the others (before them, in the pod's order). Nothing else is a
//! problem: a pod being created, pulling its image, initializing or starting
//! (`ContainerCreating`, `PodInitializing`, running and not ready yet) is on its way, a pod
//! being deleted is going away, a ready container is fine whatever happened before. The first
//! pod with a problem, in name order, is the one reported; the message says how many more have
//! one.
//!
//! Messages name the pod, the container and its image, the kubelet's or the scheduler's message
//! (for an ended container: its exit code and reason, and the end of its termination message,
//! the last lines of its log with `terminationMessagePolicy: FallbackToLogsOnError`), and say
//! what to do. They never carry a Secret: the kubelet's messages hold none, and
//! `log_summary` masks what looks like a password, a secret or a token in a log line. The
//! messages do not change while the problem stays the same (the kubelet's alternating
//! `ErrImagePull` / `ImagePullBackOff` give one message), except for the restart count.

use common_crds::conditions::ProblemReason;
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, ContainerStatus, Pod};
use kube::ResourceExt;

use super::status::Problem;
use text::{PULL_REASONS, clip, log_summary, pull_detail, without_rpc_wrapping};

mod text;

/// Reason: an image cannot be pulled.
pub const IMAGE_PULL_FAILED: &str = ProblemReason::ImagePullFailed.as_str();
/// Reason: a server container keeps ending.
pub const SERVER_CRASH_LOOPING: &str = ProblemReason::ServerCrashLooping.as_str();
/// Reason: a server container ended, or cannot be created or run.
pub const SERVER_FAILING: &str = ProblemReason::ServerFailing.as_str();
/// Reason: a resources operator container keeps ending.
pub const CRASH_LOOPING: &str = ProblemReason::CrashLooping.as_str();
/// Reason: a resources operator container ended, or cannot be created or run.
pub const FAILING: &str = ProblemReason::Failing.as_str();
/// Reason: no node can take a pod.
pub const UNSCHEDULABLE: &str = ProblemReason::Unschedulable.as_str();

/// Every reason [`problem`] gives (those of [`ProblemReason::is_pod_problem`]).
pub const REASONS: [&str; 6] = [
    IMAGE_PULL_FAILED,
    SERVER_CRASH_LOOPING,
    SERVER_FAILING,
    CRASH_LOOPING,
    FAILING,
    UNSCHEDULABLE,
];

/// Waiting reasons of a container the runtime cannot create or start.
const FAILING_REASONS: [&str; 6] = [
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreCreateHookError",
    "PreStartHookError",
    "PostStartHookError",
];

/// The longest message of the kubelet or the scheduler a condition carries.
const DETAIL_MAX: usize = 1000;

/// Whose pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// The server pods of the StatefulSet.
    Server,
    /// The pods of the resources operator's Deployment.
    ResourcesOperator,
    /// The pods of the namespace's shared resources operator, which takes its image and
    /// resources from the cluster operator's settings, not from a member's CR.
    SharedResourcesOperator,
}

impl Workload {
    fn crash_looping(self) -> ProblemReason {
        match self {
            Self::Server => ProblemReason::ServerCrashLooping,
            Self::ResourcesOperator | Self::SharedResourcesOperator => ProblemReason::CrashLooping,
        }
    }

    fn failing(self) -> ProblemReason {
        match self {
            Self::Server => ProblemReason::ServerFailing,
            Self::ResourcesOperator | Self::SharedResourcesOperator => ProblemReason::Failing,
        }
    }

    /// Where the image comes from.
    fn image_hint(self) -> &'static str {
        match self {
            Self::Server => {
                "check spec.image (or the image the operator maps spec.version to: its --server-image, Helm value server.images), that it exists and that the node may pull it (a pull Secret for a private registry: the operator's --image-pull-secrets, Helm value managedImagePullSecrets)"
            }
            Self::ResourcesOperator => {
                "check spec.resourcesOperator.image (or the operator's --resources-operator-image, Helm value resourcesOperator.image), that it exists and that the node may pull it (a pull Secret for a private registry: the operator's --image-pull-secrets, Helm value managedImagePullSecrets)"
            }
            Self::SharedResourcesOperator => {
                "the shared resources operator runs the operator's --resources-operator-image (Helm value resourcesOperator.image) whatever its members' spec.resourcesOperator.image: check that it exists and that the node may pull it (a pull Secret for a private registry: the operator's --image-pull-secrets, Helm value managedImagePullSecrets)"
            }
        }
    }

    /// What may let a pod fit a node.
    fn scheduling_hint(self) -> &'static str {
        match self {
            Self::Server => {
                "free or add capacity, or lower spec.container.resources.requests or relax spec.scheduling"
            }
            Self::ResourcesOperator => {
                "free or add capacity, or lower spec.resourcesOperator.resources.requests"
            }
            Self::SharedResourcesOperator => {
                "free or add capacity (the shared resources operator requests the operator's defaults, not its members' spec.resourcesOperator.resources)"
            }
        }
    }

    /// What may make the container end.
    fn crash_hint(self, init: bool) -> &'static str {
        match (self, init) {
            (Self::Server, false) => {
                "a server that cannot start often comes from spec.configMapName's overlay, spec.container (extraJvmOpts, env) or too little memory"
            }
            (Self::Server, true) => {
                "the init container writes the server's TLS key and certificate from the Secret of spec.security.endpointEncryption.certSecretName (keys tls.key and tls.crt)"
            }
            (Self::ResourcesOperator, _) => {
                "the resources operator ends when it cannot reach the API server or its cluster's credentials"
            }
            (Self::SharedResourcesOperator, _) => {
                "the shared resources operator ends when it cannot start (its API server client, its metrics port); a member whose server or credentials fail does not end it, its log says why (kubectl logs deployment/infinispan-resources-operator-shared)"
            }
        }
    }
}

/// The problem of the first pod, in name order, that has one (see the module's table).
pub fn problem(workload: Workload, pods: &[Pod]) -> Option<Problem> {
    let mut pods: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    pods.sort_by_key(|p| p.name_any());
    let mut found = pods.iter().filter_map(|p| pod_problem(workload, p));
    let mut first = found.next()?;
    let more = found.count();
    if more > 0 {
        let plural = if more == 1 { "pod has" } else { "pods have" };
        first.message = format!("{} ({more} more {plural} a problem)", first.message);
    }
    Some(first)
}

/// The problem of one pod.
fn pod_problem(workload: Workload, pod: &Pod) -> Option<Problem> {
    let name = pod.name_any();
    let namespace = pod.namespace().unwrap_or_default();
    let status = pod.status.as_ref()?;
    if let Some(unschedulable) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .filter(|c| c.reason.as_deref() == Some("Unschedulable"))
    {
        return Some(Problem {
            reason: ProblemReason::Unschedulable,
            message: format!(
                "pod {name} cannot be scheduled: {}; {}",
                clip(
                    unschedulable
                        .message
                        .as_deref()
                        .unwrap_or("no node fits it"),
                    DETAIL_MAX
                ),
                workload.scheduling_hint()
            ),
        });
    }
    let init = status
        .init_container_statuses
        .iter()
        .flatten()
        .map(|c| (c, true));
    let main = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| (c, false));
    init.chain(main).find_map(|(container, init)| {
        container_problem(workload, &namespace, &name, container, init)
    })
}

/// The problem of one container of pod `pod`.
fn container_problem(
    workload: Workload,
    namespace: &str,
    pod: &str,
    container: &ContainerStatus,
    init: bool,
) -> Option<Problem> {
    if container.ready {
        return None;
    }
    let state = container.state.as_ref()?;
    let what = format!(
        "pod {pod}: {} {} (image {})",
        if init { "init container" } else { "container" },
        container.name,
        container.image
    );
    let logs = format!(
        "kubectl logs -n {namespace} {pod} -c {} --previous",
        container.name
    );
    if let Some(waiting) = &state.waiting {
        let reason = waiting.reason.as_deref().unwrap_or_default();
        let message = waiting.message.as_deref().unwrap_or_default();
        if PULL_REASONS.contains(&reason) {
            return Some(Problem {
                reason: ProblemReason::ImagePullFailed,
                message: format!(
                    "{what}: the image cannot be pulled: {}; {}",
                    clip(&pull_detail(reason, message), DETAIL_MAX),
                    workload.image_hint()
                ),
            });
        }
        if reason == "CrashLoopBackOff" {
            let previous = last_terminated(container);
            return Some(Problem {
                reason: workload.crash_looping(),
                message: format!(
                    "{what} keeps ending ({}); {}: read its log ({logs}){}",
                    ended(container, previous),
                    workload.crash_hint(init),
                    last_words(previous)
                ),
            });
        }
        if FAILING_REASONS.contains(&reason) {
            return Some(Problem {
                reason: workload.failing(),
                message: format!(
                    "{what} cannot be started: {reason}: {}",
                    clip(without_rpc_wrapping(message.trim()), DETAIL_MAX)
                ),
            });
        }
        // ContainerCreating, PodInitializing...: on its way.
        return None;
    }
    if let Some(terminated) = &state.terminated {
        if init && terminated.exit_code == 0 {
            return None;
        }
        let (reason, verb) = if container.restart_count > 0 {
            (workload.crash_looping(), "keeps ending")
        } else {
            (workload.failing(), "ended")
        };
        return Some(Problem {
            reason,
            message: format!(
                "{what} {verb} ({}); {}: read its log ({}){}",
                ended(container, Some(terminated)),
                workload.crash_hint(init),
                logs.trim_end_matches(" --previous"),
                last_words(Some(terminated))
            ),
        });
    }
    // Running: a container back up after a run that ended, and not started (or ready) yet, is
    // still crash looping as far as anyone can tell; one that never ended is starting.
    if container.restart_count > 0
        && container.started != Some(true)
        && let Some(previous) = last_terminated(container)
    {
        return Some(Problem {
            reason: workload.crash_looping(),
            message: format!(
                "{what} keeps ending ({}; it runs again and has not started yet); {}: read its log ({logs}){}",
                ended(container, Some(previous)),
                workload.crash_hint(init),
                last_words(Some(previous))
            ),
        });
    }
    None
}

fn last_terminated(container: &ContainerStatus) -> Option<&ContainerStateTerminated> {
    container
        .last_state
        .as_ref()
        .and_then(|s: &ContainerState| s.terminated.as_ref())
}

/// `restarted N times, last exit code C (REASON): what it means`.
fn ended(container: &ContainerStatus, terminated: Option<&ContainerStateTerminated>) -> String {
    let restarts = match container.restart_count {
        0 => None,
        1 => Some("restarted once".to_string()),
        n => Some(format!("restarted {n} times")),
    };
    let Some(terminated) = terminated else {
        return restarts.unwrap_or_else(|| "no exit code known".to_string());
    };
    let code = terminated.exit_code;
    let reason = terminated.reason.as_deref().unwrap_or("");
    let meaning = match (reason, code) {
        ("OOMKilled", _) => {
            ": killed for going over its memory limit (spec.container.resources.limits.memory)"
        }
        (_, 0) => {
            ": it stopped by itself, which a server does when it fails to start (its log says why)"
        }
        (_, 137) => ": killed (SIGKILL)",
        (_, 143) => {
            ": stopped (SIGTERM), as the kubelet does when the startup or liveness probe fails"
        }
        _ => "",
    };
    let reason = if reason.is_empty() {
        String::new()
    } else {
        format!(" ({reason})")
    };
    match restarts {
        Some(restarts) => format!("{restarts}, last exit code {code}{reason}{meaning}"),
        None => format!("exit code {code}{reason}{meaning}"),
    }
}

/// `". Its log ends with: LINE | LINE"` from a termination message, or nothing.
fn last_words(terminated: Option<&ContainerStateTerminated>) -> String {
    match terminated
        .and_then(|t| t.message.as_deref())
        .map(log_summary)
    {
        Some(summary) if !summary.is_empty() => format!(". Its log ends with: {summary}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(name: &str, status: Value) -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"containers": [{"name": "infinispan"}]},
            "status": status,
        }))
        .expect("pod")
    }

    const IMAGE: &str = "registry.example/infinispan/server:nope";

    fn container(state: Value) -> Value {
        json!({
            "name": "infinispan", "image": IMAGE, "imageID": "", "ready": false,
            "restartCount": 0, "started": false, "state": state,
        })
    }

    fn with(mut value: Value, extra: Value) -> Value {
        for (k, v) in extra.as_object().expect("object") {
            value[k] = v.clone();
        }
        value
    }

    fn running() -> Value {
        json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
    }

    fn waiting(reason: &str, message: &str) -> Value {
        json!({"waiting": {"reason": reason, "message": message}})
    }

    fn terminated(code: i32, reason: &str, message: &str) -> Value {
        json!({"terminated": {"exitCode": code, "reason": reason, "message": message}})
    }

    fn statuses(containers: Vec<Value>) -> Value {
        json!({"phase": "Pending", "containerStatuses": containers})
    }

    const NOT_FOUND: &str = "rpc error: code = NotFound desc = failed to pull and unpack image \"registry.example/infinispan/server:nope\": failed to resolve reference \"registry.example/infinispan/server:nope\": registry.example/infinispan/server:nope: not found";

    const JVM_LOG: &str = "launch.sh: starting\nUnrecognized VM option 'NoSuchOption'\nError: Could not create the Java Virtual Machine.\nError: A fatal exception has occurred. Program will exit.\n";

    /// (case, pod status, expected reason or None, what the message must hold)
    fn table() -> Vec<(&'static str, Value, Option<&'static str>, Vec<&'static str>)> {
        vec![
            (
                "pulling",
                statuses(vec![container(waiting("ContainerCreating", ""))]),
                None,
                vec![],
            ),
            (
                "starting: running, not ready, never restarted",
                statuses(vec![container(running())]),
                None,
                vec![],
            ),
            (
                "healthy",
                json!({"phase": "Running", "containerStatuses": [with(container(running()), json!({"ready": true, "started": true}))]}),
                None,
                vec![],
            ),
            (
                "healthy after an old crash",
                json!({"phase": "Running", "containerStatuses": [with(container(running()), json!({
                    "ready": true, "started": true, "restartCount": 4,
                    "lastState": terminated(1, "Error", "boom"),
                }))]}),
                None,
                vec![],
            ),
            (
                "not ready but started after an old crash (a readiness blip)",
                json!({"phase": "Running", "containerStatuses": [with(container(running()), json!({
                    "started": true, "restartCount": 1,
                    "lastState": terminated(137, "Error", ""),
                }))]}),
                None,
                vec![],
            ),
            (
                "initializing",
                json!({"phase": "Pending",
                    "initContainerStatuses": [with(container(running()), json!({"name": "tls"}))],
                    "containerStatuses": [container(waiting("PodInitializing", ""))]}),
                None,
                vec![],
            ),
            (
                "ErrImagePull",
                statuses(vec![container(waiting("ErrImagePull", NOT_FOUND))]),
                Some(IMAGE_PULL_FAILED),
                vec![
                    "pod demo-0: container infinispan (image registry.example/infinispan/server:nope): the image cannot be pulled: failed to pull and unpack image",
                    ": not found; check spec.image",
                ],
            ),
            (
                "ImagePullBackOff",
                statuses(vec![container(waiting(
                    "ImagePullBackOff",
                    &format!("Back-off pulling image \"{IMAGE}\": ErrImagePull: {NOT_FOUND}"),
                ))]),
                Some(IMAGE_PULL_FAILED),
                vec![
                    "the image cannot be pulled: failed to pull and unpack image",
                    "not found",
                ],
            ),
            (
                "ImagePullBackOff of an older kubelet",
                statuses(vec![container(waiting(
                    "ImagePullBackOff",
                    &format!("Back-off pulling image \"{IMAGE}\""),
                ))]),
                Some(IMAGE_PULL_FAILED),
                vec!["the image cannot be pulled: ImagePullBackOff;"],
            ),
            (
                "InvalidImageName",
                statuses(vec![container(waiting(
                    "InvalidImageName",
                    "Failed to apply default image tag \"x::y\": couldn't parse image name",
                ))]),
                Some(IMAGE_PULL_FAILED),
                vec!["couldn't parse image name"],
            ),
            (
                "crash loop with the log's last words",
                json!({"phase": "Running", "containerStatuses": [with(container(waiting(
                    "CrashLoopBackOff",
                    "back-off 20s restarting failed container=infinispan pod=demo-0_team-a(uid)",
                )), json!({"restartCount": 2, "lastState": terminated(1, "Error", JVM_LOG)}))]}),
                Some(SERVER_CRASH_LOOPING),
                vec![
                    "pod demo-0: container infinispan (image registry.example/infinispan/server:nope) keeps ending (restarted 2 times, last exit code 1 (Error)); a server that cannot start",
                    "spec.configMapName",
                    ". Its log ends with: launch.sh: starting | Unrecognized VM option 'NoSuchOption' | Error: Could not create the Java Virtual Machine. | Error: A fatal exception has occurred. Program will exit.",
                    "kubectl logs -n team-a demo-0 -c infinispan --previous",
                ],
            ),
            (
                "crash loop of a server that stops by itself (exit 0, no message)",
                json!({"phase": "Running", "containerStatuses": [with(container(waiting("CrashLoopBackOff", "back-off 10s")),
                    json!({"restartCount": 1, "lastState": terminated(0, "Completed", "")}))]}),
                Some(SERVER_CRASH_LOOPING),
                vec![
                    "(restarted once, last exit code 0 (Completed): it stopped by itself",
                    "--previous)",
                ],
            ),
            (
                "back up after a crash, not started yet",
                json!({"phase": "Running", "containerStatuses": [with(container(running()),
                    json!({"restartCount": 1, "lastState": terminated(143, "Error", "ISPN000327: Cannot find a parser for element 'nope'\n\tat org.infinispan.Parser.parse(Parser.java:1)\n\t... 14 more\nISPN080002: Infinispan Server stopping")}))]}),
                Some(SERVER_CRASH_LOOPING),
                vec![
                    "(restarted once, last exit code 143 (Error): stopped (SIGTERM)",
                    "; it runs again and has not started yet);",
                    "Its log ends with: ISPN000327: Cannot find a parser for element 'nope' | ISPN080002: Infinispan Server stopping",
                ],
            ),
            (
                "terminated before any restart",
                json!({"phase": "Running", "containerStatuses": [container(terminated(2, "Error", "bad argument"))]}),
                Some(SERVER_FAILING),
                vec![
                    "ended (exit code 2 (Error));",
                    "(kubectl logs -n team-a demo-0 -c infinispan). Its log ends with: bad argument",
                ],
            ),
            (
                "OOMKilled",
                json!({"phase": "Running", "containerStatuses": [with(container(waiting("CrashLoopBackOff", "")),
                    json!({"restartCount": 3, "lastState": terminated(137, "OOMKilled", "")}))]}),
                Some(SERVER_CRASH_LOOPING),
                vec![
                    "restarted 3 times, last exit code 137 (OOMKilled): killed for going over its memory limit",
                ],
            ),
            (
                "a container the runtime cannot create",
                statuses(vec![container(waiting(
                    "CreateContainerError",
                    "rpc error: code = Unknown desc = container name in use",
                ))]),
                Some(SERVER_FAILING),
                vec!["cannot be started: CreateContainerError: container name in use"],
            ),
            (
                "missing Secret of an env var",
                statuses(vec![container(waiting(
                    "CreateContainerConfigError",
                    "secret \"creds\" not found",
                ))]),
                Some(SERVER_FAILING),
                vec!["cannot be started: CreateContainerConfigError: secret \"creds\" not found"],
            ),
            (
                "init container crash loop",
                json!({"phase": "Pending",
                    "initContainerStatuses": [with(container(waiting("CrashLoopBackOff", "")), json!({
                        "name": "tls", "restartCount": 1,
                        "lastState": terminated(1, "Error", "cat: /etc/tls-secret/tls.key: No such file or directory"),
                    }))],
                    "containerStatuses": [container(waiting("PodInitializing", ""))]}),
                Some(SERVER_CRASH_LOOPING),
                vec![
                    "pod demo-0: init container tls (image",
                    "certSecretName",
                    "-c tls --previous). Its log ends with: cat: /etc/tls-secret/tls.key: No such file or directory",
                ],
            ),
            (
                "init container failed once",
                json!({"phase": "Pending",
                    "initContainerStatuses": [with(container(terminated(1, "Error", "no key")), json!({"name": "tls"}))],
                    "containerStatuses": [container(waiting("PodInitializing", ""))]}),
                Some(SERVER_FAILING),
                vec!["init container tls", "ended", "no key"],
            ),
            (
                "init container done, server starting",
                json!({"phase": "Pending",
                    "initContainerStatuses": [with(container(terminated(0, "Completed", "")), json!({"name": "tls"}))],
                    "containerStatuses": [container(running())]}),
                None,
                vec![],
            ),
            (
                "unschedulable",
                json!({"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient cpu.",
                }]}),
                Some(UNSCHEDULABLE),
                vec![
                    "pod demo-0 cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu.; free or add capacity",
                ],
            ),
            (
                "scheduled",
                json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}),
                None,
                vec![],
            ),
        ]
    }

    #[test]
    fn container_statuses_become_problems() {
        for (case, status, reason, needles) in table() {
            let found = problem(Workload::Server, &[pod("demo-0", status)]);
            assert_eq!(
                found.as_ref().map(|p| p.reason.as_str()),
                reason,
                "{case}: {found:?}"
            );
            let message = found.map(|p| p.message).unwrap_or_default();
            for needle in needles {
                assert!(
                    message.contains(needle),
                    "{case}: {needle:?} not in {message:?}"
                );
            }
        }
    }

    #[test]
    fn the_back_off_and_the_pull_error_read_the_same() {
        let pull = problem(
            Workload::Server,
            &[pod(
                "demo-0",
                statuses(vec![container(waiting("ErrImagePull", NOT_FOUND))]),
            )],
        );
        let back_off = problem(
            Workload::Server,
            &[pod(
                "demo-0",
                statuses(vec![container(waiting(
                    "ImagePullBackOff",
                    &format!("Back-off pulling image \"{IMAGE}\": ErrImagePull: {NOT_FOUND}"),
                ))]),
            )],
        );
        assert!(pull.is_some());
        assert_eq!(pull, back_off);
    }

    #[test]
    fn the_first_pod_by_name_is_reported_with_the_count_of_the_others() {
        let pull = || statuses(vec![container(waiting("ErrImagePull", NOT_FOUND))]);
        let found = problem(
            Workload::Server,
            &[
                pod("demo-2", pull()),
                pod("demo-0", pull()),
                pod("demo-1", pull()),
            ],
        )
        .expect("a problem");
        assert!(
            found.message.starts_with("pod demo-0:"),
            "{}",
            found.message
        );
        assert!(
            found.message.ends_with("(2 more pods have a problem)"),
            "{}",
            found.message
        );
        let one = problem(
            Workload::Server,
            &[pod("demo-0", pull()), pod("demo-1", pull())],
        )
        .expect("a problem");
        assert!(
            one.message.ends_with("(1 more pod has a problem)"),
            "{}",
            one.message
        );
    }

    #[test]
    fn a_pod_being_deleted_is_no_problem() {
        let mut deleted = pod(
            "demo-0",
            statuses(vec![container(waiting("ErrImagePull", NOT_FOUND))]),
        );
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::from_second(1).expect("time"),
            ));
        assert_eq!(problem(Workload::Server, &[deleted]), None);
        assert_eq!(problem(Workload::Server, &[]), None);
    }

    /// A resources operator container restarted 5 times, back-off now, after it could not
    /// reach the API server.
    fn resources_operator_crash_looping() -> Value {
        json!({"phase": "Running", "containerStatuses": [with(container(waiting("CrashLoopBackOff", "")),
            json!({"name": "resources-operator", "restartCount": 5, "lastState": terminated(1, "Error", "error: cannot reach the API server")}))]})
    }

    #[test]
    fn the_resources_operator_has_its_own_reasons_and_hints() {
        let found = problem(
            Workload::ResourcesOperator,
            &[pod("ro-1", resources_operator_crash_looping())],
        )
        .expect("a problem");
        assert_eq!(found.reason, CRASH_LOOPING);
        assert!(
            found.message.contains("restarted 5 times"),
            "{}",
            found.message
        );
        assert!(
            !found.message.contains("spec.configMapName"),
            "{}",
            found.message
        );
        let pull = problem(
            Workload::ResourcesOperator,
            &[pod(
                "ro-1",
                statuses(vec![container(waiting("ErrImagePull", NOT_FOUND))]),
            )],
        )
        .expect("a problem");
        assert_eq!(pull.reason, IMAGE_PULL_FAILED);
        assert!(
            pull.message.contains("spec.resourcesOperator.image"),
            "{}",
            pull.message
        );
        let unschedulable = problem(
            Workload::ResourcesOperator,
            &[pod(
                "ro-1",
                json!({"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/1 nodes are available: 1 Insufficient memory.",
                }]}),
            )],
        )
        .expect("a problem");
        assert_eq!(unschedulable.reason, UNSCHEDULABLE);
        assert!(
            unschedulable
                .message
                .ends_with("1 Insufficient memory.; free or add capacity, or lower spec.resourcesOperator.resources.requests"),
            "{}",
            unschedulable.message
        );
    }

    #[test]
    fn the_shared_resources_operators_problems_point_at_the_operators_settings() {
        let pull = problem(
            Workload::SharedResourcesOperator,
            &[pod(
                "infinispan-resources-operator-shared-1",
                statuses(vec![container(waiting("ErrImagePull", NOT_FOUND))]),
            )],
        )
        .expect("a problem");
        assert_eq!(pull.reason, IMAGE_PULL_FAILED);
        for needle in [
            "pod infinispan-resources-operator-shared-1",
            "--resources-operator-image",
            "whatever its members' spec.resourcesOperator.image",
        ] {
            assert!(
                pull.message.contains(needle),
                "{needle:?}: {}",
                pull.message
            );
        }
        let crashing = problem(
            Workload::SharedResourcesOperator,
            &[pod(
                "infinispan-resources-operator-shared-1",
                resources_operator_crash_looping(),
            )],
        )
        .expect("a problem");
        assert_eq!(crashing.reason, CRASH_LOOPING);
        assert!(
            crashing
                .message
                .contains("a member whose server or credentials fail does not end it"),
            "{}",
            crashing.message
        );
    }
}
