//! Test harness for the integration and end-to-end suites: finds the running testbed
//! (`make testbed-up`), gives clients for its API server and Infinispan node, and small helpers
//! (namespaces per test, waiting, CRD installation).
//!
//! A test that needs the testbed fails, with a message saying how to start it, when it is not
//! running: it never passes silently.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};

pub mod audit;
pub mod chaos;
pub mod cluster_operator;
pub mod identity;
pub mod node;
pub mod operator;
pub mod pods;
pub mod process;
pub mod proxy;
pub mod scrape;

/// Field manager the test harness applies with.
pub const TEST_FIELD_MANAGER: &str = "infinispan-operators-e2e";

/// The repository root (this crate lives in `<root>/e2e`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// The resource (plural) of `kind`: the project's CRDs say theirs (`batches`); another kind
/// (a ConfigMap, a Secret) is its lower-case name and an `s`.
pub fn plural_of(kind: &str) -> String {
    common_crds::generate::all_crds()
        .into_iter()
        .find(|crd| crd.spec.names.kind == kind)
        .map(|crd| crd.spec.names.plural)
        .unwrap_or_else(|| format!("{}s", kind.to_lowercase()))
}

/// The testbed's run directory: `$TESTBED_RUN_DIR`, else `<root>/target/testbed`.
pub fn run_dir() -> PathBuf {
    std::env::var_os("TESTBED_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/testbed"))
}

/// What `e2e/testbed/up.sh` wrote into `<run dir>/env`.
#[derive(Clone, Debug)]
pub struct Testbed {
    pub run_dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub kubernetes_version: String,
    pub infinispan_url: String,
    pub infinispan_user: String,
    pub infinispan_password: String,
    pub infinispan_version: String,
}

impl Testbed {
    /// Reads the env file of the running testbed, or fails saying how to start one.
    pub fn get() -> anyhow::Result<Self> {
        Self::from_run_dir(&run_dir())
    }

    pub fn from_run_dir(run_dir: &Path) -> anyhow::Result<Self> {
        let env_file = run_dir.join("env");
        let text = std::fs::read_to_string(&env_file).with_context(|| {
            format!(
                "the testbed is not running ({} is missing): start it with `make testbed-up` \
                 (or run everything with `make test`)",
                env_file.display()
            )
        })?;
        let vars = parse_env_file(&text);
        let var = |name: &str| -> anyhow::Result<String> {
            vars.get(name).cloned().with_context(|| {
                format!(
                    "{} has no {name}: re-run `make testbed-up`",
                    env_file.display()
                )
            })
        };
        Ok(Self {
            run_dir: run_dir.to_path_buf(),
            kubeconfig: PathBuf::from(var("KUBECONFIG")?),
            kubernetes_version: var("KUBERNETES_VERSION")?,
            infinispan_url: var("INFINISPAN_URL")?,
            infinispan_user: var("INFINISPAN_USER")?,
            infinispan_password: var("INFINISPAN_PASSWORD")?,
            infinispan_version: var("INFINISPAN_VERSION")?,
        })
    }

    /// A client for the API server as the testbed's admin (system:masters).
    pub async fn admin_client(&self) -> anyhow::Result<Client> {
        client_from_kubeconfig(&self.kubeconfig).await
    }

    /// The testbed's own kubectl (version-matched with the API server).
    pub fn kubectl(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(self.run_dir.join("bin/kubectl"));
        cmd.env("KUBECONFIG", &self.kubeconfig);
        cmd
    }
}

/// Parses `export NAME="value"` lines.
pub fn parse_env_file(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("export "))
        .filter_map(|assignment| assignment.split_once('='))
        .map(|(name, value)| (name.to_string(), value.trim_matches('"').to_string()))
        .collect()
}

pub async fn client_from_kubeconfig(path: &Path) -> anyhow::Result<Client> {
    let kubeconfig =
        Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

/// Applies every label policy and its binding (`common_crds::generate::label_policies`) as the
/// test harness; the API server enforces them a moment later (compiled asynchronously).
pub async fn apply_label_policies(client: &Client) -> anyhow::Result<()> {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let params = PatchParams::apply(TEST_FIELD_MANAGER).force();
    for (policy, binding) in common_crds::generate::label_policies() {
        Api::<ValidatingAdmissionPolicy>::all(client.clone())
            .patch(&policy.name_any(), &params, &Patch::Apply(&policy))
            .await?;
        Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .patch(&binding.name_any(), &params, &Patch::Apply(&binding))
            .await?;
    }
    Ok(())
}

/// The shared label policy's binding (of [`apply_label_policies`]) scoped as a cluster operator
/// keeps it (`cluster_operator::policy_scope`): matching the namespaces with a shared resources
/// operator, none yet. [`PolicyScope::include`](::cluster_operator::policy_scope::PolicyScope::include)
/// adds one, as a cluster joining a shared operator does.
pub async fn scope_shared_label_policy(
    client: &Client,
) -> anyhow::Result<::cluster_operator::policy_scope::PolicyScope> {
    let scope = ::cluster_operator::policy_scope::PolicyScope::new(
        client.clone(),
        Some(common_crds::generate::SHARED_LABEL_POLICY_NAME.to_string()),
    );
    scope
        .seed(&::cluster_operator::scope::WatchScope::Namespaces(
            Default::default(),
        ))
        .await?;
    Ok(scope)
}

/// The namespace selector of the ValidatingAdmissionPolicyBinding `name`, and the field manager
/// other than Helm's that wrote its `matchResources` (the cluster operator's
/// `policy_scope`).
pub async fn binding_selector(
    client: &Client,
    name: &str,
) -> anyhow::Result<(serde_json::Value, Option<String>)> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
    let binding = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .get(name)
        .await?;
    let selector = serde_json::to_value(
        binding
            .spec
            .match_resources
            .as_ref()
            .and_then(|m| m.namespace_selector.clone()),
    )?;
    let manager = binding
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.to_string().contains("f:matchResources"))
        })
        .filter_map(|m| m.manager.clone())
        .find(|m| m != "helm");
    Ok((selector, manager))
}

/// A client of the testbed's API server as `admin`, impersonating `user` in `groups` (what
/// that identity may do, without a token of its own).
pub async fn impersonating(
    testbed: &Testbed,
    user: &str,
    groups: &[String],
) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(&testbed.kubeconfig)
        .with_context(|| format!("reading {}", testbed.kubeconfig.display()))?;
    let mut config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    config.auth_info.impersonate = Some(user.to_string());
    config.auth_info.impersonate_groups = Some(groups.to_vec());
    Ok(Client::try_from(config)?)
}

/// Polls `check` every 200 ms until it returns `Some`, or fails after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(error) => last_error = Some(error),
        }
        if tokio::time::Instant::now() >= deadline {
            match last_error {
                Some(error) => {
                    bail!("{what}: not reached after {timeout:?}; last error: {error:#}")
                }
                None => bail!("{what}: not reached after {timeout:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A namespace of one test. Tests delete it at their end. One a failed test leaves behind (the
/// value dropped without [`TestNamespace::delete`]) is described into
/// `target/e2e-logs/namespaces/<name>.txt` (its pods, the pods' logs and its Events) and then
/// deleted: on the testbed's node its pods would keep their CPU and memory requests and starve
/// the suites after it. `E2E_KEEP_NAMESPACES=1` keeps it as it is, for inspection.
pub struct TestNamespace {
    pub name: String,
    client: Client,
    deleted: bool,
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.deleted || std::env::var_os("E2E_KEEP_NAMESPACES").is_some_and(|v| v == "1") {
            return;
        }
        let kubectl = run_dir().join("bin/kubectl");
        let kubeconfig = run_dir().join("kubeconfig");
        let run = |args: &[&str]| {
            std::process::Command::new(&kubectl)
                .env("KUBECONFIG", &kubeconfig)
                .args(args)
                .stdin(std::process::Stdio::null())
                .output()
                .map(|o| {
                    let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
                    text.push_str(&String::from_utf8_lossy(&o.stderr));
                    text
                })
                .unwrap_or_else(|e| format!("running {}: {e}\n", kubectl.display()))
        };
        let ns = self.name.as_str();
        let mut report = String::new();
        for args in [
            vec!["-n", ns, "get", "all,pvc,configmaps,secrets", "-o", "wide"],
            vec!["-n", ns, "get", "events", "--sort-by=.lastTimestamp"],
            vec![
                "-n",
                ns,
                "logs",
                "--all-containers",
                "--prefix",
                "--tail=200",
                "-l",
                "app.kubernetes.io/managed-by",
            ],
        ] {
            report.push_str(&format!("$ kubectl {}\n", args.join(" ")));
            report.push_str(&run(&args));
            report.push('\n');
        }
        let dir = repo_root().join("target/e2e-logs/namespaces");
        let file = dir.join(format!("{ns}.txt"));
        let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, report));
        let deleted = run(&["delete", "namespace", ns, "--wait=false"]);
        // The project's CRs carry finalizers their operators release; the namespace's deletion
        // takes those operators (the chart is in the namespace) at the same time, and the
        // namespace would stay Terminating for good, in the way of the suites after it (OLM
        // copies CSVs into every namespace). Released here, once their deletion began.
        const KINDS: &str = "infinispans.infinispan.org,backups.infinispan.org,restores.infinispan.org,caches.infinispan.org,templates.infinispan.org,counters.infinispan.org,schemas.infinispan.org,tasks.infinispan.org";
        for _ in 0..10 {
            let listed = run(&["-n", ns, "get", KINDS, "-o", "name", "--ignore-not-found"]);
            let objects: Vec<&str> = listed
                .lines()
                .filter(|l| l.contains(".infinispan.org/"))
                .collect();
            if objects.is_empty() {
                break;
            }
            for object in objects {
                run(&[
                    "-n",
                    ns,
                    "patch",
                    object,
                    "--type=merge",
                    "-p",
                    r#"{"metadata":{"finalizers":null}}"#,
                ]);
            }
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        eprintln!(
            "namespace {ns} of a failed test: described in {} ({}), {} (E2E_KEEP_NAMESPACES=1 keeps it)",
            file.display(),
            written.map_or_else(|e| e.to_string(), |()| "written".into()),
            deleted.trim()
        );
    }
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TestNamespace {
    /// Creates `<prefix>-<random>` labelled for the restricted Pod Security profile.
    pub async fn create(client: &Client, prefix: &str) -> anyhow::Result<Self> {
        let suffix: u32 = rand_u32();
        let name = format!("{prefix}-{suffix:08x}");
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "infinispan-operators-e2e": "true",
                }
            }
        }))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        Ok(Self {
            name,
            client: client.clone(),
            deleted: false,
        })
    }
}

impl TestNamespace {
    /// Deletes the namespace (the controller-manager finishes the deletion in the background).
    pub async fn delete(mut self) -> anyhow::Result<()> {
        Api::<Namespace>::all(self.client.clone())
            .delete(&self.name, &DeleteParams::background())
            .await?;
        self.deleted = true;
        Ok(())
    }
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish() as u32
}

/// Applies every CRD of the project (server-side apply) and waits until each is Established.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let params = PatchParams::apply(TEST_FIELD_MANAGER).force();
    for crd in common_crds::generate::all_crds() {
        let name = crd.metadata.name.clone().context("CRD without a name")?;
        api.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying CRD {name}"))?;
        wait_established(&api, &name, Duration::from_secs(30)).await?;
    }
    Ok(())
}

/// Installs the test CRD `name` of another project (`e2e/testdata/<name>.yaml`: its field names,
/// unknown fields pruned; cluster-wide) when it is missing, and waits until it is established
/// and discovery lists `plural` in `group_version`; whether it installed it.
pub async fn ensure_test_crd(
    client: &Client,
    name: &str,
    group_version: &str,
    plural: &str,
) -> anyhow::Result<bool> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let text = std::fs::read_to_string(repo_root().join(format!("e2e/testdata/{name}.yaml")))?;
    let crd: CustomResourceDefinition = serde_saphyr::from_str(&text)?;
    if let Some(found) = crds.get_opt(name).await? {
        // One of the tests' own, left by an earlier run or another suite: brought to this
        // checkout's file (a field added since would be pruned otherwise).
        if found.labels().contains_key("infinispan-operators-e2e") && found.spec != crd.spec {
            let mut wanted = crd.clone();
            wanted.metadata.resource_version = found.metadata.resource_version.clone();
            crds.replace(name, &PostParams::default(), &wanted).await?;
            wait_established(&crds, name, Duration::from_secs(60)).await?;
        }
        return Ok(false);
    }
    crds.create(&PostParams::default(), &crd).await?;
    let wait = Duration::from_secs(60);
    wait_established(&crds, name, wait).await?;
    // Discovery lists the new resource a moment later.
    eventually(&format!("{plural} in discovery"), wait, || async move {
        Ok(client
            .list_api_group_resources(group_version)
            .await
            .ok()
            .filter(|l| l.resources.iter().any(|r| r.name == plural))
            .map(|_| ()))
    })
    .await?;
    Ok(true)
}

/// Waits until the CRD `name` says `Established=True`.
pub async fn wait_established(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    eventually(&format!("CRD {name} Established"), timeout, || async move {
        let crd = api.get(name).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        Ok(established.then_some(()))
    })
    .await
}

/// Removes from `command`'s environment the variables `cargo test` gives a crate
/// (CARGO_PKG_NAME, CARGO_MANIFEST_DIR, OUT_DIR...), for a command that runs cargo itself.
/// Build scripts such as ring's rerun when they change, so passing them on would rebuild half
/// the dependency tree on every run; cargo's configuration variables are kept.
pub fn without_crate_variables(command: &mut std::process::Command) {
    const CONFIG_PREFIXES: &[&str] = &[
        "CARGO_HOME",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_",
        "CARGO_PROFILE_",
        "CARGO_NET_",
        "CARGO_HTTP_",
        "CARGO_REGISTRIES_",
        "CARGO_REGISTRY_",
        "CARGO_TERM_",
        "CARGO_INCREMENTAL",
    ];
    for (name, _) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        let crate_variable = name.starts_with("CARGO_")
            && !CONFIG_PREFIXES
                .iter()
                .any(|prefix| name.starts_with(prefix));
        if crate_variable || name == "OUT_DIR" {
            command.env_remove(name);
        }
    }
}

/// Path of a binary of this workspace, built once per test process with
/// `cargo build -p <package> --bin <bin>` (the cargo that runs the tests, `$CARGO`), so that
/// end-to-end tests start the real binary as a separate process. The path comes from cargo's
/// own build messages, so it is right whatever the target directory or profile setup.
pub fn workspace_binary(package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    cargo_build(package, bin, &[])
}

/// Like [`workspace_binary`], the release build (`--release --locked`): the binary the
/// Containerfiles put in the images, for the tests that run it exactly as an image would.
pub fn workspace_release_binary(package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    cargo_build(package, bin, &["--release", "--locked"])
}

fn cargo_build(package: &str, bin: &str, flags: &[&str]) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = std::process::Command::new(cargo);
    without_crate_variables(&mut command);
    let output = command
        .current_dir(repo_root())
        .args([
            "build",
            "-p",
            package,
            "--bin",
            bin,
            "--message-format=json",
        ])
        .args(flags)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running cargo build -p {package}"))?;
    if !output.status.success() {
        bail!("cargo build -p {package} failed ({})", output.status);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| message["target"]["name"] == bin)
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .with_context(|| format!("cargo build -p {package} reported no executable {bin}"))
}
