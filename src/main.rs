use clap::Parser;

fn main() {
    // A monitor allocates little: one malloc arena per thread would only add resident pages.
    // SAFETY: called before any other thread exists; mallopt only tunes the allocator.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
    let cli = gpumon::cli::Cli::parse();
    match gpumon::runner::main_entry(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("gpumon: {e:#}");
            std::process::exit(1);
        }
    }
}
