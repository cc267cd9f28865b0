use clap::Parser;

fn main() {
    let cli = gpumon::cli::Cli::parse();
    match gpumon::runner::main_entry(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("gpumon: {e:#}");
            std::process::exit(1);
        }
    }
}
