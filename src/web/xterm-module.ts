// The terminal's library, built as a module of its own (build.mjs) and imported by the Terminal tab when
// it opens (terminal-panel.tsx): xterm.js and its fit addon (the terminal follows its pane's size).
export { Terminal } from '@xterm/xterm';
export { FitAddon } from '@xterm/addon-fit';
