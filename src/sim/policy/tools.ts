/**
 * Maps playbook actions onto whatever tools the request offers: a shell-like
 * tool (bash, Bash, exec_command, run_shell_command, shell, ...) for `run`, a
 * file-writing tool (write, Write, write_file, ...) for `write`, falling back
 * to a shell printf when no writer is offered.
 */
import type { OfferedTool } from "../prompt-context.ts";
import type { ToolCallOut } from "./types.ts";

const SHELL_NAMES = ["bash", "Bash", "exec_command", "run_shell_command", "shell", "shell_command", "run_command", "terminal", "execute_command"];
const WRITE_NAMES = ["write", "Write", "write_file", "create_file", "str_replace_based_edit_tool"];
const COMMAND_KEYS = ["command", "cmd", "commands", "script"];
const PATH_KEYS = ["path", "file_path", "filePath", "filename", "absolute_path"];
const CONTENT_KEYS = ["content", "contents", "text", "file_text"];

export function findShellTool(tools: readonly OfferedTool[]): OfferedTool | undefined {
  for (const name of SHELL_NAMES) {
    const t = tools.find((x) => x.name === name && commandKey(x));
    if (t) return t;
  }
  return undefined;
}

export function findWriteTool(tools: readonly OfferedTool[]): OfferedTool | undefined {
  for (const name of WRITE_NAMES) {
    const t = tools.find((x) => x.name === name && pickKey(x, PATH_KEYS) && pickKey(x, CONTENT_KEYS));
    if (t) return t;
  }
  return undefined;
}

/** A call of `tool` running `command`; array-typed command parameters get ["bash", "-lc", command]. */
export function shellCall(tool: OfferedTool, command: string): ToolCallOut {
  const key = commandKey(tool) as string;
  const value = tool.params[key] === "array" ? ["bash", "-lc", command] : command;
  return { name: tool.name, arguments: { [key]: value } };
}

export function writeCall(tool: OfferedTool, path: string, content: string): ToolCallOut {
  const args: Record<string, unknown> = {};
  if (tool.name === "str_replace_based_edit_tool") args.command = "create";
  args[pickKey(tool, PATH_KEYS) as string] = path;
  args[pickKey(tool, CONTENT_KEYS) as string] = content;
  return { name: tool.name, arguments: args };
}

/** A shell command that writes exactly `content` to `path`. */
export function writeCommand(path: string, content: string): string {
  return `printf '%s' ${shellQuote(content)} > ${shellQuote(path)}`;
}

export function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

function commandKey(tool: OfferedTool): string | undefined {
  return pickKey(tool, COMMAND_KEYS);
}

function pickKey(tool: OfferedTool, keys: readonly string[]): string | undefined {
  return keys.find((k) => k in tool.params);
}
