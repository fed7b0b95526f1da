# One image for asynqpy: the worker now; the dashboard, exporter and scheduler are commands of the same image.
#   docker build -t asynqpy .
#   docker run --rm -e REDIS_URL=redis://redis:6379/0 asynqpy worker app.tasks:mux --queues default=1
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY asynqpy ./asynqpy
COPY inspector ./inspector
COPY exporter ./exporter
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

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
