//! The `python_programmer` prompt, as in the original: how to write code
//! for this sandbox.

use crate::server::PrimsServer;
use crate::tools::types::PythonProgrammerArgs;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{PromptMessage, Role};
use rmcp::{prompt, prompt_router};

/// The mounted file names, from a comma-separated list or a JSON array.
fn file_list(raw: Option<&str>) -> Vec<String> {
    let Some(raw) = raw.map(str::trim).filter(|s| !s.is_empty()) else {
        return Vec::new();
    };
    if let Ok(v) = serde_json::from_str::<Vec<String>>(raw) {
        return v;
    }
    raw.split(',')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

fn render(task: &str, mounted_files: Option<&str>) -> String {
    let files = file_list(mounted_files);
    let mounts = if files.is_empty() {
        "No files are mounted yet; use mount_file (or run_code's files argument) to bring \
         remote data into mounts/."
            .to_owned()
    } else {
        let list: Vec<String> = files
            .iter()
            .map(|f| format!("- mounts/{}", f.trim_start_matches("mounts/")))
            .collect();
        format!("These files are mounted (read-only):\n{}", list.join("\n"))
    };
    format!(
        "You are an expert Python programmer. Write Python code for this task:\n\n{task}\n\n\
         Rules:\n\
         - The session keeps one live Python interpreter, like notebook cells: variables, \
         imports and functions of earlier run_code calls are still defined, so build on them \
         instead of repeating work. print() what you want to see; a final expression's value \
         also comes back as result, and display() and IPython magics work as in Jupyter. If a \
         result says state \"reset\", earlier variables are gone: recompute them.\n\
         - Plots: matplotlib figures come back as images (plt.show(), or leave the figure \
         open), and are saved under output/figures/.\n\
         - Read input files by their mount path, e.g. pd.read_csv('mounts/my_data.csv').\n\
         - Write every file you want back (tables, plots as PNG) to output/, e.g. \
         plt.savefig('output/plot.png').\n\
         - The sandbox has no network; list extra pip packages in run_code's requirements \
         (once: the session keeps them) or use %pip install in a cell.\n\
         - Keep the session_id of a result to reuse the workspace in the next call.\n\n\
         {mounts}\n\nThen call run_code with the script."
    )
}

#[prompt_router(router = "prompt_router", vis = "pub(crate)")]
impl PrimsServer {
    #[prompt(
        name = "python_programmer",
        description = "Instructions for writing Python for the PRIMS sandbox: a live interpreter per session, print output, read mounts/, write output/."
    )]
    async fn python_programmer(
        &self,
        Parameters(args): Parameters<PythonProgrammerArgs>,
    ) -> Vec<PromptMessage> {
        vec![PromptMessage::new_text(
            Role::User,
            render(&args.task, args.mounted_files.as_deref()),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_mounted_files() {
        let text = render("sum it", Some("a.csv, mounts/b.xlsx"));
        assert!(text.contains("- mounts/a.csv") && text.contains("- mounts/b.xlsx"));
        assert_eq!(file_list(Some("[\"x.csv\"]")), vec!["x.csv"]);
        assert!(render("t", None).contains("No files are mounted"));
    }
}
