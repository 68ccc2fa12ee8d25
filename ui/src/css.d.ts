/** Style sheets imported for their side effect: esbuild gathers them into app.css. */
declare module '*.css'
