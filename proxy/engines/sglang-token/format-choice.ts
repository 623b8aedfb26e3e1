/**
 * How token mode reads a model's format at start: which family's tokenizer folder and template it
 * loads, which parsers read the sampled text, and whether the proxy parses it or the engine does.
 *
 * 1. `modelFamily` given: that family's defaults, each option still given wins (as always).
 * 2. Neither a family, a folder nor a template given: the `qwen3` defaults.
 * 3. A folder (`tokenizerPath`) or a template (`chatTemplate`) without a family: the template it
 *    renders with is read, checked against the renderer (`tokenizer/template-support.ts`) and
 *    recognised (`tokenizer/families/recognise.ts`).
 *    - A known format: that family's defaults, the recognised parsers; one info line says so.
 *    - Not a known format, with a `toolCallParser` Polar parses: parsed here with it, as told.
 *    - Not a known format otherwise: parsing is delegated to the engine (as `delegateParsing`),
 *      with the engine's own parser names: `toolCallParser` / `reasoningParser` as given, else
 *      the ones the engine was launched with (`/server_info`); none at all fails the start,
 *      naming `toolCallParser`. One warning line says so and why.
 *
 * @module
 */
import type { Logger } from "../../../protocol";
import {
  defaultTokenizerDir,
  type LoadTokenizerOptions,
  readChatTemplate,
} from "../../../tokenizer/chat-tokenizer";
import { type ModelFamily, type ModelFamilyName, modelFamily } from "../../../tokenizer/families";
import {
  type RecognisedFormat,
  recogniseTemplate,
  type UnrecognisedFormat,
} from "../../../tokenizer/families/recognise";
import { toolCallParserNames } from "../../../tokenizer/parsers";
import { checkChatTemplate, type TemplateOrigin } from "../../../tokenizer/template-support";
import { TokenModeConfigError } from "./config-error";
import { engineParserArgs } from "./engine-parsers";

/** The format options of token mode (a subset of `TokenModeOptions`). */
export interface FormatOptions {
  modelFamily?: string;
  tokenizerPath?: string;
  chatTemplate?: string;
  toolCallParser?: string;
  reasoningParser?: string;
  delegateParsing?: boolean;
}

/** One start-up log line. */
export interface StartNote {
  level: "info" | "warn";
  message: string;
  fields: Record<string, unknown>;
}

/** What token mode loads and how it parses. */
export interface FormatChoice {
  /** The family whose format is read; null when the template is in no format Polar-TS knows. */
  family: ModelFamilyName | null;
  tokenizerDir: string;
  /** The template to render with in place of the folder's, if any (see `loadChatTokenizer`). */
  template: LoadTokenizerOptions;
  toolCallParser: string;
  reasoningParser: string;
  delegateParsing: boolean;
  /** The parser names are the engine's own (a format Polar-TS does not parse), passed to it as they are. */
  engineNames: boolean;
  /** How the format was chosen (null when nothing was: the defaults or a family given). */
  note: StartNote | null;
}

/** The template a family renders with unless one is given. */
function familyTemplate(family: ModelFamily, chatTemplate: string | undefined): LoadTokenizerOptions {
  if (chatTemplate !== undefined) return { chatTemplate };
  if (family.chatTemplateSource === undefined) return {};
  return {
    chatTemplateSource: family.chatTemplateSource,
    chatTemplateName: `the ${family.name} family's template`,
  };
}

function ofFamily(family: ModelFamily, given: FormatOptions, tokenizerDir: string): FormatChoice {
  return {
    family: family.name,
    tokenizerDir,
    template: familyTemplate(family, given.chatTemplate),
    toolCallParser: given.toolCallParser ?? family.toolCallParser,
    reasoningParser: given.reasoningParser ?? family.reasoningParser,
    delegateParsing: given.delegateParsing ?? false,
    engineNames: false,
    note: null,
  };
}

/**
 * The format choice for `given`; `engine` is asked for its parser names when the format is not
 * one Polar-TS parses. Throws `UnknownModelFamilyError` for an unknown `modelFamily`,
 * `TokenizerLoadError` when the template cannot be read, {@link TokenModeConfigError} when
 * parsing must be delegated and no parser is named.
 *
 * @example
 * ```ts
 * const choice = await chooseFormat({ tokenizerPath: "models/Mistral-7B-Instruct-v0.3" }, { urls: [engineUrl] });
 * choice.delegateParsing; // true: the engine's `mistral` parser reads the tool calls
 * ```
 */
export async function chooseFormat(
  given: FormatOptions,
  engine?: { urls: readonly string[]; logger?: Logger },
): Promise<FormatChoice> {
  if (given.modelFamily !== undefined) {
    const family = modelFamily(given.modelFamily);
    return ofFamily(family, given, given.tokenizerPath ?? family.tokenizerDir());
  }
  if (given.tokenizerPath === undefined && given.chatTemplate === undefined) {
    const family = modelFamily("qwen3");
    return ofFamily(family, given, family.tokenizerDir());
  }
  const tokenizerDir = given.tokenizerPath ?? defaultTokenizerDir();
  const { source, origin } = await readChatTemplate(
    tokenizerDir,
    given.chatTemplate === undefined ? {} : { chatTemplate: given.chatTemplate },
  );
  // A feature the renderer lacks is the first thing to say: no parser choice makes it usable.
  checkChatTemplate(source, origin);
  const found = recogniseTemplate(source);
  if (found.family !== null) return recognisedChoice(found, given, origin);
  return unrecognisedChoice(found, given, tokenizerDir, origin, engine?.urls ?? []);
}

/** A template of a known family: that family's defaults with the recognised parsers, said at start. */
function recognisedChoice(
  found: RecognisedFormat,
  given: FormatOptions,
  origin: TemplateOrigin,
): FormatChoice {
  const family = modelFamily(found.family);
  // A template given alone (no folder) of a known family: that family's tokenizer folder.
  const choice = ofFamily(family, given, given.tokenizerPath ?? family.tokenizerDir());
  choice.toolCallParser = given.toolCallParser ?? found.toolCallParser;
  choice.reasoningParser = given.reasoningParser ?? found.reasoningParser;
  const replaced = given.chatTemplate === undefined && family.chatTemplateSource !== undefined;
  choice.note = {
    level: "info",
    message: `token mode: ${origin.file} is the ${family.name} family's format (${found.evidence}); parsers ${choice.toolCallParser} / ${choice.reasoningParser}${replaced ? `, prompts rendered with the ${family.name} family's template` : ""}`,
    fields: { model_family: family.name, template: origin.file },
  };
  return choice;
}

/**
 * A template in no format Polar-TS parses: parsed here with a given parser Polar knows, else
 * delegated to the engine under its own parser names (given, else those it was launched with).
 */
async function unrecognisedChoice(
  found: UnrecognisedFormat,
  given: FormatOptions,
  tokenizerDir: string,
  origin: TemplateOrigin,
  engineUrls: readonly string[],
): Promise<FormatChoice> {
  const unknownFormat = `${origin.file} is not a format Polar-TS parses (${found.reason})`;
  const template: LoadTokenizerOptions =
    given.chatTemplate === undefined ? {} : { chatTemplate: given.chatTemplate };
  if (given.toolCallParser !== undefined && toolCallParserNames().includes(given.toolCallParser)) {
    const reasoningParser = given.reasoningParser ?? "none";
    return {
      family: null,
      tokenizerDir,
      template,
      toolCallParser: given.toolCallParser,
      reasoningParser,
      delegateParsing: given.delegateParsing ?? false,
      engineNames: false,
      note: {
        level: "warn",
        message: `token mode: ${unknownFormat}; parsed as the given parsers say (${given.toolCallParser} / ${reasoningParser})`,
        fields: { model_family: null, template: origin.file },
      },
    };
  }
  const launched =
    given.toolCallParser === undefined || given.reasoningParser === undefined
      ? await engineParserArgs(engineUrls)
      : null;
  const tool = given.toolCallParser ?? launched?.toolCallParser ?? undefined;
  if (tool === undefined)
    throw new TokenModeConfigError(
      "toolCallParser",
      `${unknownFormat}, so tool calls are parsed by the engine, which needs the name of its parser for the format: give --tool-call-parser NAME (the engine's name, e.g. mistral or llama3), start the engine with --tool-call-parser, or give --model-family when the model is of a family Polar-TS knows`,
    );
  const reasoning = given.reasoningParser ?? launched?.reasoningParser ?? "none";
  const whence = (name: "toolCallParser" | "reasoningParser") =>
    given[name] !== undefined
      ? "given"
      : launched?.[name]
        ? `the engine's --${name === "toolCallParser" ? "tool-call" : "reasoning"}-parser`
        : "none named";
  return {
    family: null,
    tokenizerDir,
    template,
    toolCallParser: tool,
    reasoningParser: reasoning,
    delegateParsing: true,
    engineNames: true,
    note: {
      level: "warn",
      message: `token mode: ${unknownFormat}; parsing is delegated to the engine (as --delegate-parsing): tool-call parser ${tool} (${whence("toolCallParser")}), reasoning parser ${reasoning} (${whence("reasoningParser")})`,
      fields: {
        model_family: null,
        template: origin.file,
        tool_call_parser: tool,
        reasoning_parser: reasoning,
      },
    },
  };
}
