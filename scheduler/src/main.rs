use clap::Parser;

/// tas-scheduler (not implemented yet).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {}

fn main() {
    let _args = Args::parse();
}
