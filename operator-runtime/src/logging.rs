//! Logging of an operator process: `tracing` events to stderr, as text or one JSON object a
//! line, filtered by a level or `EnvFilter` directives (e.g. `info`, `my_operator=debug,info`);
//! ANSI colours only when stderr is a terminal.

/// `--log-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

/// `--log-level` is not a level nor valid filter directives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --log-level {level:?}: {message}")]
pub struct LogLevelError {
    pub level: String,
    pub message: String,
}

/// Installs the process's subscriber. A second call keeps the first subscriber (harmless, e.g.
/// in tests); only an invalid `level` is an error.
pub fn init(format: LogFormat, level: &str) -> Result<(), LogLevelError> {
    let filter = tracing_subscriber::EnvFilter::try_new(level).map_err(|e| LogLevelError {
        level: level.to_string(),
        message: e.to_string(),
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_level_is_refused_with_a_reason() {
        let Err(error) = init(LogFormat::Text, "info,=[") else {
            panic!("accepted");
        };
        assert_eq!(error.level, "info,=[");
        assert!(
            error
                .to_string()
                .starts_with("invalid --log-level \"info,=[\": ")
        );
    }

    #[test]
    fn initialising_twice_is_harmless() {
        assert_eq!(init(LogFormat::Json, "debug"), Ok(()));
        assert_eq!(init(LogFormat::Text, "my_operator=debug,info"), Ok(()));
    }
}
