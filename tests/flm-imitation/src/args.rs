//! The command line, as FastFlowLM's option parser (Boost.Program_options) reads it.

/// The command line, as FastFlowLM's option parser reads it.
#[derive(Debug, Default)]
pub struct Args {
    pub positional: Vec<String>,
    pub json: bool,
    pub version: bool,
    pub help: bool,
    pub quiet: bool,
    pub force: bool,
    pub port: Option<i64>,
    pub host: Option<String>,
    pub ctx_len: Option<i64>,
    pub filter: Option<String>,
    pub q_len: Option<usize>,
    pub backend: Option<String>,
    /// `--asr 1`: also load Whisper (`whisper-v3:turbo`).
    pub asr: bool,
}

pub fn parse_args(raw: &[String]) -> Result<Args, String> {
    let mut args = Args::default();
    let mut it = raw.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("the required argument for option '{name}' is missing"))
        };
        match a.as_str() {
            "--json" | "-j" => args.json = true,
            "--version" | "-v" => args.version = true,
            "--help" | "-h" => args.help = true,
            "--quiet" => args.quiet = true,
            "--force" => args.force = true,
            "--port" | "-p" => {
                args.port = Some(value(a)?.parse().map_err(|_| "invalid port".to_string())?)
            }
            "--host" => args.host = Some(value(a)?),
            "--ctx-len" | "-c" => {
                args.ctx_len = Some(
                    value(a)?
                        .parse()
                        .map_err(|_| "invalid ctx-len".to_string())?,
                )
            }
            // A Boost bool: it takes a value.
            "--asr" | "-a" => {
                args.asr = match value(a)?.to_ascii_lowercase().as_str() {
                    "1" | "true" | "yes" | "on" => true,
                    "0" | "false" | "no" | "off" => false,
                    other => {
                        return Err(format!(
                            "the argument ('{other}') for option '--asr' is invalid"
                        ))
                    }
                }
            }
            "--filter" => args.filter = Some(value(a)?),
            // 1.0.x: the execution backend (`flm` or `rai`); 0.9.45 does not know it.
            "--backend" => args.backend = Some(value(a)?),
            "--q-len" | "-q" => {
                args.q_len = Some(value(a)?.parse().map_err(|_| "invalid q-len".to_string())?)
            }
            "--pmode"
            | "--socket"
            | "-s"
            | "--cors"
            | "--embed"
            | "-e"
            | "--prefill-chunk-len"
            | "-pcl"
            | "--img-pre-resize"
            | "-r"
            | "--preemption" => {
                value(a)?;
            }
            s if s.starts_with('-') => return Err(format!("unrecognised option '{s}'")),
            s => args.positional.push(s.to_string()),
        }
    }
    Ok(args)
}
