// Hide the console window on Windows release builds (harmless elsewhere).
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

use std::process::ExitCode;

fn main() -> ExitCode {
    hearth_app::documents::child::run_if_asked();
    // webkit2gtk's DMA-BUF renderer shows a blank window on some GPUs and Wayland setups;
    // turn it off unless the user chose otherwise.
    if std::env::var_os("WEBKIT_DISABLE_DMABUF_RENDERER").is_none() {
        std::env::set_var("WEBKIT_DISABLE_DMABUF_RENDERER", "1");
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HEARTH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
                // Protocol traces of the HTTP and TLS layers include request headers (the
                // HF_TOKEN): those targets never log below info, whatever HEARTH_LOG says.
                .add_directive("ureq=info".parse().expect("valid directive"))
                .add_directive("ureq_proto=info".parse().expect("valid directive"))
                .add_directive("rustls=info".parse().expect("valid directive")),
        )
        .with_writer(std::io::stderr)
        .init();
    match hearth_desktop::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("hearth-desktop: {error:#}");
            ExitCode::FAILURE
        }
    }
}
