//! Server tasks (scripts): list, get script, create/replace, delete, execute.
//!
//! The server has no delete endpoint for tasks. Scripts live in the internal cache
//! `___script_cache` (key = task name), which the REST cache API reaches: deleting the entry
//! removes the task (checked on 16.0.7, see docs/server-api.md). Running scripts needs a
//! JavaScript engine in the server (the testbed adds nashorn-core to server/lib).

use http::Method;
use serde::Deserialize;

use crate::client::{Client, Req};
use crate::error::Error;
use crate::names::encode;

/// The cache holding the scripts.
pub const SCRIPT_CACHE: &str = "___script_cache";

/// A task as listed by the server.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TaskInfo {
    pub name: String,
    /// `Script`, `AdminServerTask`, or a Java task type.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub parameters: Vec<String>,
    #[serde(default)]
    pub execution_mode: Option<String>,
    #[serde(default)]
    pub allowed_role: Option<String>,
}

fn task_path(name: &str) -> String {
    format!("/rest/v2/tasks/{}", encode(name))
}

impl Client {
    /// Tasks; `user_only` leaves out the server's admin tasks (`@@...`).
    pub async fn list_tasks(&self, user_only: bool) -> Result<Vec<TaskInfo>, Error> {
        let what = "list tasks";
        let path = if user_only {
            "/rest/v2/tasks?type=user"
        } else {
            "/rest/v2/tasks"
        };
        self.expect(Req::get(path), what, &[200]).await?.json(what)
    }

    /// The script text of a task.
    pub async fn task_script(&self, name: &str) -> Result<String, Error> {
        let what = format!("read task '{name}'");
        Ok(self
            .expect(
                Req::get(format!("{}?action=script", task_path(name))),
                &what,
                &[200],
            )
            .await?
            .text())
    }

    /// Creates or replaces a script task. The script's first-line metadata comment
    /// (`// mode=local,language=javascript`) sets its options.
    pub async fn put_task(&self, name: &str, script: &str) -> Result<(), Error> {
        let what = format!("upload task '{name}'");
        self.expect(
            Req::new(Method::PUT, task_path(name)).body("text/javascript", script.to_owned()),
            &what,
            &[200, 204],
        )
        .await
        .map(|_| ())
    }

    /// Deletes a script task by removing it from `___script_cache`.
    pub async fn delete_task(&self, name: &str) -> Result<(), Error> {
        let what = format!("delete task '{name}'");
        let path = format!("/rest/v2/caches/{SCRIPT_CACHE}/{}", encode(name));
        self.delete(path, &what, &[200, 204]).await
    }

    /// Executes a task with string parameters and returns the raw result text.
    pub async fn exec_task(&self, name: &str, params: &[(&str, &str)]) -> Result<String, Error> {
        let what = format!("execute task '{name}'");
        let mut path = format!("{}?action=exec", task_path(name));
        for (k, v) in params {
            path.push_str(&format!("&param.{}={}", encode(k), encode(v)));
        }
        Ok(self
            .expect(Req::new(Method::POST, path), &what, &[200])
            .await?
            .text())
    }
}
