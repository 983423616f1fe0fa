// Package cdp drives a headless Chromium through the Chrome DevTools
// Protocol for the project's browser tests: Launch starts the browser with a
// fresh profile and no network features, and a Conn sends commands and
// waits for events over a WebSocket client of its own (RFC 6455, client
// side: masked text frames, fragmented and control frames read), so the
// module needs no browser-automation dependency.
package cdp
