# The workbench image for docker-compose.yml: CPU torch first, then the package.
FROM python:3.11-slim
WORKDIR /app
RUN pip install --no-cache-dir torch==2.13.0
COPY pyproject.toml README.md ./
COPY services services
COPY db db
COPY app_pages app_pages
COPY app.py ./
COPY .streamlit .streamlit
RUN pip install --no-cache-dir .
ENV HF_HUB_OFFLINE=1
EXPOSE 8501
