fn main() {
    std::process::exit(reprorun::cli::main());
}
