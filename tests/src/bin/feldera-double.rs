//! `feldera-double`: serves the Feldera double until killed.
//!
//! ```text
//! feldera-double --schema schema.json --port 0 [--pipeline NAME] [--completion-delay-ms N]
//! ```
//! Prints `feldera-double listening on http://127.0.0.1:PORT pipeline=NAME` once the port is
//! bound, so a parent process can read the address from the first line of stdout.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig, Edition, FelderaDouble};

#[derive(Debug, Parser)]
#[command(about = "A test double of Feldera's HTTP API, with fault injection under /control")]
struct Args {
    /// Program schema in Feldera's JSON shape: {"inputs": [...], "outputs": [...]}.
    #[arg(long)]
    schema: PathBuf,
    /// Port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The pipeline name served.
    #[arg(long, default_value = "pipeline")]
    pipeline: String,
    /// Delay before an accepted request is processed (and its token completes).
    #[arg(long, default_value_t = 0, conflicts_with = "completion_never")]
    completion_delay_ms: u64,
    /// Never complete until released with `POST /control/release`.
    #[arg(long)]
    completion_never: bool,
    /// How long ingress waits on a paused pipeline before answering 503.
    #[arg(long, default_value_t = 30_000)]
    proxy_timeout_ms: u64,
    /// Answer `inprogress` completion status with 202 instead of 200.
    #[arg(long)]
    inprogress_202: bool,
    /// Play Feldera's community edition: no fault tolerance, every checkpoint refused.
    #[arg(long)]
    community: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let schema = match std::fs::read(&args.schema)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
    {
        Ok(schema) => schema,
        Err(e) => {
            eprintln!(
                "feldera-double: cannot read schema {}: {e}",
                args.schema.display()
            );
            return ExitCode::from(2);
        }
    };
    let delay = if args.completion_never {
        CompletionDelay::Never
    } else {
        CompletionDelay::Fixed(Duration::from_millis(args.completion_delay_ms))
    };
    let config = DoubleConfig::new(args.pipeline.clone(), schema)
        .with_port(args.port)
        .with_completion_delay(delay)
        .with_proxy_timeout(Duration::from_millis(args.proxy_timeout_ms))
        .with_inprogress_202(args.inprogress_202)
        .with_edition(if args.community {
            Edition::Community
        } else {
            Edition::Enterprise
        });
    let double = match FelderaDouble::start(config) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("feldera-double: cannot start: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "feldera-double listening on {} pipeline={}",
        double.base_url(),
        args.pipeline
    );
    let _ = std::io::stdout().flush();
    // Serve until killed; the server runs on the double's own thread.
    loop {
        std::thread::park();
    }
}
