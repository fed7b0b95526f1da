# One image for asynqpy: the worker, the dashboard (web), the exporter and the scheduler are commands of it.
# It has no Redis inside (nor the embedded Valkey of `asynqpy dev`): give it yours with REDIS_URL.
#   docker build -t asynqpy .
#   docker run --rm -e REDIS_URL=redis://redis:6379/0 asynqpy          # the demo worker (asynqpy.demo:mux)
# Your own handlers (say app/tasks.py, defining `mux`) get in either way; the working directory
# /home/asynqpy is on the import path:
#   - mounted:  docker run --rm -v "$PWD/app:/home/asynqpy/app:ro" -e REDIS_URL=redis://redis:6379/0 \
#                 asynqpy worker app.tasks:mux --queues critical=6,default=3,low=1
#   - baked into an image of yours, from a Dockerfile of your own:
#       FROM asynqpy
#       COPY app/ ./app/
#       CMD ["worker", "app.tasks:mux", "--queues", "critical=6,default=3,low=1"]
#     (your dependencies: `RUN pip install --no-cache-dir --user -r requirements.txt` before the CMD)
#   docker run --rm -p 8080:8080 -e REDIS_URL=... -v $PWD/users.toml:/home/asynqpy/asynqpy-users.toml \
#       asynqpy web --bind 0.0.0.0:8080 --workers 2        (the dashboard; templates/static are in the wheel)
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY asynqpy ./asynqpy
COPY inspector ./inspector
COPY exporter ./exporter
COPY webui ./webui
COPY templates ./templates
COPY static ./static
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[web]"

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && useradd --create-home --uid 10001 --user-group asynqpy
USER 10001:10001
WORKDIR /home/asynqpy
STOPSIGNAL SIGTERM
ENTRYPOINT ["asynqpy"]
CMD ["worker", "asynqpy.demo:mux", "--queues", "critical=6,default=3,low=1"]
