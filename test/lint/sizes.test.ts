// The code's size limits, held by the lint's own test: no file under src/ or components/ over MAX_FILE_LINES lines,
// and no function there (a declaration, a method, an accessor, a constructor, a function expression or an arrow
// function, each counted whole with what it nests) over MAX_FUNCTION_LINES. A file or a function past them does
// several things; it is split into named parts, each with one reason to change. The functions are found with the
// TypeScript compiler's own parser, so a function is what the language says it is.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..");
const MAX_FILE_LINES = 600;
const MAX_FUNCTION_LINES = 150;

/** Every .ts file under `dir`, relative to the repository. */
function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)))
    .sort();
}

/** A function's name as a reader finds it: its own, else the variable, property or method it is given to. */
function functionName(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return "constructor";
  if (node.name !== undefined) return node.name.getText(source);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))
    return parent.name.getText(source);
  const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  return `(anonymous function at line ${line})`;
}

/** The lines of a text: as an editor numbers them, a last line without its newline counted too. */
function lineCount(text: string): number {
  return text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
}

/** What of `text` (the file at `path`) passes the limits: one line per file or function past them. */
function sizeProblems(path: string, text: string): string[] {
  const problems: string[] = [];
  const lines = lineCount(text);
  if (lines > MAX_FILE_LINES) problems.push(`${path}: ${lines} lines (at most ${MAX_FILE_LINES})`);
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
      const fn = node as ts.FunctionLikeDeclaration;
      const first = source.getLineAndCharacterOfPosition(fn.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(fn.getEnd()).line;
      const length = last - first + 1;
      if (length > MAX_FUNCTION_LINES)
        problems.push(
          `${path}:${first + 1}: function ${functionName(fn, source)} is ${length} lines (at most ${MAX_FUNCTION_LINES})`,
        );
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return problems;
}

describe("the code's size limits", () => {
  it(`no file under src/ or components/ is over ${MAX_FILE_LINES} lines, no function over ${MAX_FUNCTION_LINES}`, () => {
    const problems = [...sourceFiles("src"), ...sourceFiles("components")].flatMap((path) =>
      sizeProblems(path, readFileSync(join(ROOT, path), "utf8")),
    );
    expect(problems).toEqual([]);
  });

  // The check itself, on texts made to pass and to fail it: a limit it cannot see is no limit.
  it("names a file over the limit and each function over it, whatever its form", () => {
    const body = (n: number) => Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i};`).join("\n");
    const text = [
      `export function declared() {\n${body(MAX_FUNCTION_LINES + 1)}\n}`,
      `const arrow = () => {\n${body(MAX_FUNCTION_LINES + 1)}\n};`,
      `class C {\n  method() {\n${body(MAX_FUNCTION_LINES + 1)}\n  }\n}`,
      `export function fits() {\n${body(MAX_FUNCTION_LINES)}\n}`,
    ].join("\n");
    const problems = sizeProblems("src/fixture.ts", text);
    expect(problems).toEqual([
      `src/fixture.ts: ${lineCount(text)} lines (at most ${MAX_FILE_LINES})`,
      `src/fixture.ts:1: function declared is ${MAX_FUNCTION_LINES + 1} lines (at most ${MAX_FUNCTION_LINES})`,
      expect.stringMatching(new RegExp(`^src/fixture\\.ts:\\d+: function arrow is ${MAX_FUNCTION_LINES + 1} lines`)),
      expect.stringMatching(new RegExp(`^src/fixture\\.ts:\\d+: function method is ${MAX_FUNCTION_LINES + 1} lines`)),
    ]);
    expect(sizeProblems("src/small.ts", `export function fits() {\n${body(MAX_FUNCTION_LINES)}\n}\n`)).toEqual([]);
  });
});
