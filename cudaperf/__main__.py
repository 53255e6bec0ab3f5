from cudaperf.cli import app

app()
