/**
 * The tools a harness offers, as the scripted agent policy sees them: read back from the `# Tools`
 * section the Qwen3 chat template renders (`<tools>` with one JSON function per line), sorted into
 * roles (shell, read, write, edit, list) by name and JSON schema, with the argument names each tool
 * expects. This is how one policy drives Claude Code (`Bash/Read/Write/Edit`), Qwen Code
 * (`run_shell_command/read_file/write_file/edit`), Codex (`exec_command`), OpenCode
 * (`bash/read/write/edit`, camelCase arguments), Pi (`read/bash/edit/write`), Gemini CLI
 * (`run_shell_command/read_file/write_file/replace`, the last with a required `instruction`),
 * Copilot CLI (`bash/view/create/edit`), Cline (`run_commands` with a list of whole commands,
 * `editor`) and plain `bash`/`shell`/`execute` tools.
 *
 * @module
 */

/** A JSON schema property, as far as the policy reads it. */
interface SchemaProperty {
  type?: string | string[];
  description?: string;
  items?: { type?: string; properties?: Record<string, SchemaProperty>; required?: string[] };
  default?: unknown;
}

/** One tool offered in the prompt. */
export interface OfferedTool {
  name: string;
  description: string;
  properties: Record<string, SchemaProperty>;
  required: string[];
}

/** The role a tool plays for the policy. */
export type ToolRole = "shell" | "read" | "write" | "edit" | "list";

/** A tool with its role and the property names to fill. */
export interface RoleTool {
  tool: OfferedTool;
  /** Property for the command (shell), the path (read/write/edit/list). */
  main: string;
  /** write: the content property; edit: the old-text property. */
  second?: string;
  /** edit: the new-text property. */
  third?: string;
  /** edit tools taking `edits: [{old, new}]`: the array property and its item keys. */
  editsArray?: { property: string; old: string; new: string };
  /** shell: the command is an argv array (`["bash", "-lc", cmd]`) rather than a string. */
  argv?: boolean;
  /** shell: the property is a list of whole commands (Cline's `run_commands({commands})`). */
  commandList?: boolean;
}

/** The roles found among the offered tools (first match wins per role). */
export type Toolbox = Partial<Record<ToolRole, RoleTool>>;

/** `file_path`, `filePath` and `FilePath` all become `filepath`. */
const norm = (name: string) => name.toLowerCase().replace(/[_-]/g, "");

const COMMAND_KEYS = ["command", "cmd", "script", "commands"];
const PATH_KEYS = [
  "filepath",
  "path",
  "absolutepath",
  "filename",
  "file",
  "targetfile",
  "dirpath",
  "directory",
];
const CONTENT_KEYS = ["content", "contents", "filetext", "text", "data"];
const OLD_KEYS = ["oldstring", "oldtext", "oldstr", "old", "search", "find"];
const NEW_KEYS = ["newstring", "newtext", "newstr", "new", "replace", "replacement"];

function findKey(props: Record<string, unknown>, candidates: readonly string[]): string | undefined {
  const byNorm = new Map(Object.keys(props).map((k) => [norm(k), k]));
  for (const c of candidates) {
    const k = byNorm.get(c);
    if (k !== undefined) return k;
  }
  return undefined;
}

/**
 * Reads the tools of a rendered Qwen3 prompt (the `<tools>` block; one JSON object per line).
 * Lines that are not JSON are skipped: they are not ours to judge. A system prompt may carry
 * `<tools>` blocks of its own (Copilot CLI's usage guidelines, `<tools><bash>…</bash></tools>`)
 * before the template's: the block with the most tools is the one the template rendered.
 *
 * @example
 * ```ts
 * parseOfferedTools(prompt).map((t) => t.name); // ["bash", "read", "write", "edit"]
 * ```
 */
export function parseOfferedTools(prompt: string): OfferedTool[] {
  let best: OfferedTool[] = [];
  for (const block of prompt.matchAll(/<tools>\n([\s\S]*?)\n<\/tools>/g)) {
    const tools = toolsOfBlock(block[1]!);
    if (tools.length > best.length) best = tools;
  }
  return best;
}

function toolsOfBlock(block: string): OfferedTool[] {
  const tools: OfferedTool[] = [];
  for (const line of block.split("\n")) {
    try {
      const raw = JSON.parse(line) as { function?: Record<string, unknown> } & Record<string, unknown>;
      const fn = (raw.function ?? raw) as {
        name?: unknown;
        description?: unknown;
        parameters?: { properties?: Record<string, SchemaProperty>; required?: string[] } | null;
      };
      if (typeof fn.name !== "string") continue;
      tools.push({
        name: fn.name,
        description: typeof fn.description === "string" ? fn.description : "",
        properties: fn.parameters?.properties ?? {},
        required: fn.parameters?.required ?? [],
      });
    } catch {
      // Not JSON: a template or harness quirk; the other tools still count.
    }
  }
  return tools;
}

const SHELL_NAMES =
  /^(bash|shell|sh|execute|exec|execcommand|runshellcommand|runcommand|terminal|runterminalcmd)$/;
const READ_NAMES = /^(read|readfile|view|viewfile|cat|openfile)$/;
const WRITE_NAMES = /^(write|writefile|createfile|writetofile)$/;
const EDIT_NAMES = /^(edit|editfile|strreplace|replace|strreplaceeditor|replaceinfile)$/;
const LIST_NAMES = /^(ls|list|listdirectory|listdir|listfiles)$/;

function classify(tool: OfferedTool): [ToolRole, RoleTool] | undefined {
  const n = norm(tool.name);
  const props = tool.properties;
  const command = findKey(props, COMMAND_KEYS);
  const file = findKey(props, PATH_KEYS);
  const content = findKey(props, CONTENT_KEYS);
  const oldKey = findKey(props, OLD_KEYS);
  const newKey = findKey(props, NEW_KEYS);
  if (command && (SHELL_NAMES.test(n) || /bash|shell|exec|command/.test(n))) {
    const type = props[command]?.type;
    const array =
      type === "array" || (Array.isArray(type) && type.includes("array") && !type.includes("string"));
    // `command: string[]` is one argv (Codex); `commands: string[]` is several whole commands (Cline).
    if (array && norm(command) === "commands") return ["shell", { tool, main: command, commandList: true }];
    return ["shell", { tool, main: command, ...(array ? { argv: true } : {}) }];
  }
  if (!file) return undefined;
  // Codex's `view_image` takes a `path` too; an image viewer is no way to read source code.
  if (/image|img|screenshot|picture|photo/.test(n)) return undefined;
  if (EDIT_NAMES.test(n) || (oldKey && newKey)) {
    if (oldKey && newKey) return ["edit", { tool, main: file, second: oldKey, third: newKey }];
    // Pi-style `edits: [{oldText, newText}]`.
    for (const [key, prop] of Object.entries(props)) {
      const itemProps = prop.items?.properties;
      if (prop.type !== "array" || !itemProps) continue;
      const o = findKey(itemProps, OLD_KEYS);
      const w = findKey(itemProps, NEW_KEYS);
      if (o && w) return ["edit", { tool, main: file, editsArray: { property: key, old: o, new: w } }];
    }
    return undefined;
  }
  if (content && (WRITE_NAMES.test(n) || /write|create/.test(n))) {
    return ["write", { tool, main: file, second: content }];
  }
  if (READ_NAMES.test(n) || /read|view/.test(n)) return ["read", { tool, main: file }];
  if (LIST_NAMES.test(n)) return ["list", { tool, main: file }];
  return undefined;
}

/**
 * Sorts the offered tools into roles; the first tool of each role wins.
 *
 * @example
 * ```ts
 * const box = toolboxOf(parseOfferedTools(prompt));
 * box.shell?.tool.name; // "run_shell_command"
 * ```
 */
export function toolboxOf(tools: readonly OfferedTool[]): Toolbox {
  const box: Toolbox = {};
  for (const tool of tools) {
    const found = classify(tool);
    if (found && !box[found[0]]) box[found[0]] = found[1];
  }
  return box;
}

/**
 * Fills the required properties the policy has no value for with neutral ones (booleans false,
 * the call's purpose for `description`, `reason` or `instruction`), so strict harnesses accept it.
 */
function fillRequired(tool: OfferedTool, args: Record<string, unknown>, purpose: string): void {
  for (const key of tool.required) {
    if (key in args) continue;
    const prop = tool.properties[key];
    if (prop?.default !== undefined) args[key] = prop.default;
    else if (prop?.type === "boolean") args[key] = false;
    // Gemini CLI's `replace` requires an `instruction`: what the edit is for, in words.
    else if (/desc|reason|explanation|instruction/i.test(key)) args[key] = purpose;
  }
  // Optional but common: a one-line description helps harnesses that show it to the user.
  for (const key of Object.keys(tool.properties)) {
    if (!(key in args) && norm(key) === "description") args[key] = purpose;
  }
}

/** One tool call: the tool's name and its arguments object. */
export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * A shell call running `command`.
 *
 * @example
 * ```ts
 * shellCall(box.shell!, "ls -a", "List the files"); // { name: "bash", arguments: { command: "ls -a" } }
 * ```
 */
export function shellCall(shell: RoleTool, command: string, purpose: string): ToolCall {
  const args: Record<string, unknown> = {
    [shell.main]: shell.argv ? ["bash", "-lc", command] : shell.commandList ? [command] : command,
  };
  fillRequired(shell.tool, args, purpose);
  return { name: shell.tool.name, arguments: args };
}

/**
 * A read, write, edit or list call on `file`.
 *
 * @example
 * ```ts
 * fileCall(box.edit!, "/w/calc.js", "Fix subtract", "a + b", "a - b");
 * ```
 */
export function fileCall(
  role: RoleTool,
  file: string,
  purpose: string,
  second?: string,
  third?: string,
): ToolCall {
  const args: Record<string, unknown> = { [role.main]: file };
  if (role.editsArray) {
    args[role.editsArray.property] = [{ [role.editsArray.old]: second, [role.editsArray.new]: third }];
  } else {
    if (role.second !== undefined && second !== undefined) args[role.second] = second;
    if (role.third !== undefined && third !== undefined) args[role.third] = third;
  }
  fillRequired(role.tool, args, purpose);
  return { name: role.tool.name, arguments: args };
}

/**
 * The main argument of a call made earlier (the command of a shell call, as one string; the path
 * of a file call), for reading the conversation back.
 *
 * @example
 * ```ts
 * mainArgument(box.shell!, { command: ["bash", "-lc", "ls"] }); // "ls"
 * ```
 */
export function mainArgument(role: RoleTool, args: Record<string, unknown>): string {
  const v = args[role.main];
  if (Array.isArray(v) && role.commandList) return v.map(String).join(" && ");
  if (Array.isArray(v)) return String(v.at(-1) ?? "");
  return typeof v === "string" ? v : "";
}
